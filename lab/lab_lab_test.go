//go:build lab

package lab

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moltproject/molt/internal/nspawn"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSmallLabUpServeDown brings up the small topology, checks every Node
// is Ready at the version and a pod on a worker answers a request made
// from the control-plane host, then tears down and checks nothing is left.
// Run: go test -tags lab -run TestSmallLab -v ./lab/ (root; ~1 minute).
func TestSmallLabUpServeDown(t *testing.T) { upServeDown(t, SmallTopology()) }

// TestFullLabUpServeDown does the same with the full topology (3 etcd
// members behind the LB, 7 hosts; ~2-3 minutes).
func TestFullLabUpServeDown(t *testing.T) { upServeDown(t, FullTopology()) }

func upServeDown(t *testing.T, topo Topology) {
	requireLabTools(t)
	l := newTestLab(t, topo, nil)
	cfg := l.Config()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	t0 := time.Now()
	require.NoError(t, l.Up(ctx))
	t.Logf("up in %s", time.Since(t0).Round(time.Millisecond))

	cs, err := l.Clientset()
	require.NoError(t, err)
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, len(cfg.Topology.Hosts))
	for _, n := range nodes.Items {
		require.True(t, NodeReady(&n), n.Name)
		require.Equal(t, "v"+cfg.Version, n.Status.NodeInfo.KubeletVersion, n.Name)
	}

	// A Deployment pod on a worker, asked from inside cp-1's network
	// namespace: the request crosses hosts over the lab bridge.
	pods, err := cs.CoreV1().Pods(DemoNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + DemoDeploy})
	require.NoError(t, err)
	require.NotEmpty(t, pods.Items)
	var pod corev1.Pod = pods.Items[0]
	require.Contains(t, []string{"worker-1", "worker-2"}, pod.Spec.NodeName)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialInNamespace(ctx, nsPath(l.Network().HostNS("cp-1")), network, addr)
		},
	}}
	resp, err := client.Get(fmt.Sprintf("http://%s:%d/", pod.Status.PodIP, EchoPort))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, fmt.Sprintf("pod=%s node=%s\n", pod.Name, pod.Spec.NodeName), string(body))

	out, err := l.Exec(ctx, "worker-1", "systemctl", "is-active", "kubelet.service", "containerd.service")
	require.NoError(t, err)
	require.Equal(t, "active\nactive\n", string(out))

	st := l.Status(ctx)
	for _, h := range st.Hosts {
		require.True(t, h.Running && h.NodeReady, h.Name)
	}
	var sb strings.Builder
	st.Print(&sb, l.Network().LabNS())
	t.Log("\n" + sb.String())

	t0 = time.Now()
	require.NoError(t, l.Up(ctx), "a second Up is a no-op")
	t.Logf("second up in %s", time.Since(t0).Round(time.Millisecond))
}

// requireNothingLeft checks no nspawn process, namespace or state remains.
func requireNothingLeft(t *testing.T, l *Lab) {
	t.Helper()
	for _, h := range l.Config().Topology.Hosts {
		_, ok := findHost(h.Name, l.Network().HostNS(h.Name))
		require.False(t, ok, "host %s still running", h.Name)
	}
	for _, ns := range l.Network().Namespaces() {
		require.NoFileExists(t, nsPath(ns))
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	require.NoError(t, err)
	require.NotContains(t, string(out), l.Config().Prefix)
	links, err := exec.Command("ip", "-o", "link").Output()
	require.NoError(t, err)
	require.NotContains(t, string(links), "vh-")
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	require.NotContains(t, string(mounts), l.Config().Prefix)
	require.NoDirExists(t, l.Config().StateDir)
}

func dumpConsoles(t *testing.T, state string) {
	logs, _ := filepath.Glob(filepath.Join(state, "console", "*.log"))
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("console %s:\n%s", filepath.Base(f), b)
	}
}

// tlog sends lab output to t.Log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newTestLab is a lab in a temporary state dir with its own namespace
// prefix; cleanup tears it down and checks nothing is left.
func newTestLab(t *testing.T, topo Topology, tweak func(*Config)) *Lab {
	t.Helper()
	version := os.Getenv("MOLT_LAB_VERSION")
	if version == "" {
		version = "1.34.4"
	}
	cache := nspawn.DefaultCacheDir()
	testenv.RequireFile(t, filepath.Join(cache, "k8s", "v"+version, "bin", "kubelet"), "kubelet (build/k8s/build.sh "+version+")")
	testenv.RequireFile(t, filepath.Join(cache, "etcd", "v3.6.4", "bin", "etcd"), "etcd (build/k8s/etcd.sh)")

	cfg := DefaultConfig()
	cfg.Topology = topo
	cfg.Version = version
	cfg.Cache = cache
	cfg.StateDir = filepath.Join(t.TempDir(), "state")
	cfg.ModuleDir = moduleRoot(t)
	cfg.Prefix = "mlabt-"
	cfg.Log = slog.New(slog.NewTextHandler(tlog{t}, nil))
	cfg.Out = tlog{t}
	if tweak != nil {
		tweak(&cfg)
	}
	l, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			dumpConsoles(t, cfg.StateDir)
		}
		t0 := time.Now()
		require.NoError(t, l.Down(context.Background()))
		t.Logf("down in %s", time.Since(t0).Round(time.Millisecond))
		requireNothingLeft(t, l)
	})
	return l
}
