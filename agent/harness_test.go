package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/internal/agenttest"
)

// fakeCoordinator is the shared stand-in for the coordinator's agent
// endpoints, with the short names these tests use.
type fakeCoordinator struct{ *agenttest.Coordinator }

func newFakeCoordinator(t *testing.T) *fakeCoordinator {
	return &fakeCoordinator{agenttest.New(t)}
}

func (f *fakeCoordinator) enqueue(ops ...api.Operation) { f.Enqueue(ops...) }

func (f *fakeCoordinator) resultsFor(id string) []api.OperationResult { return f.ResultsFor(id) }

func (f *fakeCoordinator) waitResult(t *testing.T, id string) api.OperationResult {
	t.Helper()
	return f.WaitResult(t, id, 30*time.Second)
}

// fakeHost is a temp host tree with a simulated kubelet: binaries are
// shell scripts; "restarting" the kubelet unit makes /healthz answer
// healthy unless the installed script contains "BROKEN". Static pods are
// "run" from the manifest directory unless an image contains "bad".
type fakeHost struct {
	t    *testing.T
	root string
	cfg  Config

	mu       sync.Mutex
	restarts map[string]int
	healthy  bool
	healthz  *httptest.Server
	files    *httptest.Server
}

// newFakeHost makes a host whose agent enrolls with coord's bootstrap
// token and CA pin.
func newFakeHost(t *testing.T, coord *fakeCoordinator) *fakeHost {
	return newFakeHostAt(t, coord.URL, coord)
}

func newFakeHostAt(t *testing.T, url string, coord *fakeCoordinator) *fakeHost {
	h := &fakeHost{t: t, root: t.TempDir(), restarts: map[string]int{}}
	h.healthz = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		ok := h.healthy
		h.mu.Unlock()
		if !ok {
			http.Error(w, "not ok", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(h.healthz.Close)
	h.files = httptest.NewServer(http.FileServer(http.Dir(filepath.Join(h.root, "srv"))))
	t.Cleanup(h.files.Close)
	require.NoError(t, os.MkdirAll(filepath.Join(h.root, "srv"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(h.root, "usr/bin"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(h.root, "etc/kubernetes/manifests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(h.root, "usr/bin/kubelet"), kubeletScript("v1.33.0", false), 0o755))
	h.healthy = true

	cfg := DefaultConfig()
	cfg.Coordinator, cfg.Cluster, cfg.Node = url, "c1", "n1"
	cfg.BootstrapToken, cfg.CAPin = coord.Token, coord.CAPin()
	cfg.HostRoot = h.root
	cfg.KubeletHealthz = h.healthz.URL + "/healthz"
	cfg.HeartbeatInterval = 50 * time.Millisecond
	cfg.HealthCheckInterval = 20 * time.Millisecond
	// Bounds, not waits: a healthy fake answers at once, and only a broken
	// one waits them out. 1 s was too short for a healthy one on a loaded
	// machine (TestUpgradeBinaryCrashAtEveryStep/finished: "kubelet after
	// 1s: ... context deadline exceeded", run beside a CI demo).
	cfg.HealthTimeout = 10 * time.Second
	cfg.StaticPodTimeout = 10 * time.Second
	cfg.PollWait = 100 * time.Millisecond
	cfg.RetryMin, cfg.RetryMax = 5*time.Millisecond, 50*time.Millisecond
	cfg.ProbeTimeout = time.Second
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Units = h
	cfg.Runtime = h
	h.cfg = cfg
	return h
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func kubeletScript(version string, broken bool) []byte {
	s := "#!/bin/sh\necho Kubernetes " + version + "\n"
	if broken {
		s += "# BROKEN\n"
	}
	return []byte(s)
}

// RestartUnit simulates systemd: the "process" now runs the installed binary.
func (h *fakeHost) RestartUnit(_ context.Context, name string) error {
	b, err := os.ReadFile(filepath.Join(h.root, "usr/bin/kubelet"))
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restarts[name]++
	h.healthy = !strings.Contains(string(b), "BROKEN")
	return nil
}

func (h *fakeHost) restartCount(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.restarts[name]
}

func (h *fakeHost) Version(context.Context) (string, error) { return "1.6.20", nil }
func (h *fakeHost) ImportArchive(context.Context, string) ([]string, error) {
	return []string{"example.com/img:1"}, nil
}
func (h *fakeHost) Pull(_ context.Context, ref string) error {
	return fmt.Errorf("%w: pull %s: registry unreachable", ErrRuntime, ref)
}

// StaticPods plays the kubelet: every manifest in the directory runs,
// except containers whose image contains "bad".
func (h *fakeHost) StaticPods(context.Context) ([]api.StaticPodStatus, error) {
	dir := filepath.Join(h.root, "etc/kubernetes/manifests")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []api.StaticPodStatus
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var m struct {
			Metadata struct{ Name string }
			Spec     struct{ Containers []struct{ Image string } }
		}
		if err := yaml.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		for _, c := range m.Spec.Containers {
			out = append(out, api.StaticPodStatus{Name: m.Metadata.Name + "-n1", Image: c.Image, Ready: !strings.Contains(c.Image, "bad")})
		}
	}
	return out, nil
}

// serve publishes content on the file server and returns its URL and sum.
func (h *fakeHost) serve(name string, content []byte) (string, string) {
	require.NoError(h.t, os.WriteFile(filepath.Join(h.root, "srv", name), content, 0o644))
	sum := sha256.Sum256(content)
	return h.files.URL + "/" + name, hex.EncodeToString(sum[:])
}

func (h *fakeHost) kubelet() string { return filepath.Join(h.root, "usr/bin/kubelet") }

// runAgent starts an agent with cfg. stop cancels it and returns Run's
// error; done is closed when Run returned (its error then via stop).
func runAgent(t *testing.T, cfg Config) (stop func() error, done <-chan struct{}) {
	t.Helper()
	a, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan struct{})
	var runErr error
	go func() { runErr = a.Run(ctx); close(ch) }()
	var once sync.Once
	stop = func() error {
		once.Do(func() {
			cancel()
			<-ch
			require.NoError(t, a.Close())
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop, ch
}

func sha(t *testing.T, path string) string {
	t.Helper()
	s, err := fileSHA256(path)
	require.NoError(t, err)
	return s
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func upgradeOp(id, url, sum, version string) api.Operation {
	return api.Operation{ID: id, Kind: api.OpUpgradeBinary, UpgradeBinary: &api.UpgradeBinary{
		Component: api.ComponentKubelet, Version: version, URL: url, SHA256: sum}}
}

func manifest(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: kube-system\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
}

// startAtFirst names h's node so that its agent, spread over the members
// by its name (client.SpreadBy), starts at the first of them: tests of
// failover from the member an agent talks to need to know which one it
// is.
func (h *fakeHost) startAtFirst(t *testing.T) {
	t.Helper()
	eps, err := client.ParseEndpoints(h.cfg.Coordinator)
	require.NoError(t, err)
	for i := 1; i < 100; i++ {
		node := fmt.Sprintf("n%d", i)
		if client.NewEndpoints(eps, nil).SpreadBy(h.cfg.Cluster+"/"+node) == 0 {
			h.cfg.Node = node
			return
		}
	}
	t.Fatal("no node name starts at the first member")
}
