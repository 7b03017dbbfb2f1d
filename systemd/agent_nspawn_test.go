package systemd_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/agenttest"
	"github.com/moltproject/molt/internal/hosttest"
	"github.com/moltproject/molt/internal/nspawn"
	"github.com/moltproject/molt/systemd"
)

// requireHosts needs what booting an nspawn host takes (failing under
// CI=true when it is missing) and returns a test context and the rootfs.
func requireHosts(t *testing.T) (context.Context, string) {
	t.Helper()
	hosttest.Require(t, "go")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	rootfs, err := nspawn.EnsureRootfs(ctx, nspawn.DefaultCacheDir())
	require.NoError(t, err)
	return ctx, rootfs
}

// bootHost boots a host named after prefix and this process, stopped at
// the test's end, with the journal of units logged if the test failed.
func bootHost(t *testing.T, ctx context.Context, rootfs, prefix string, units ...string) *nspawn.Host {
	t.Helper()
	return hosttest.Boot(t, ctx, nspawn.BootConfig{Name: fmt.Sprintf("%s-%d", prefix, os.Getpid()), Rootfs: rootfs}, units...)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestAgentUnderSystemd runs molt-agent as molt-agent.service (installed by
// install.sh) in a booted nspawn host with a stand-in kubelet.service.
func TestAgentUnderSystemd(t *testing.T) {
	ctx, rootfs := requireHosts(t)

	// Build the agent and three stand-in kubelets.
	bin := t.TempDir()
	hosttest.GoBuild(t, "../cmd/molt-agent", filepath.Join(bin, "molt-agent"), "-ldflags=-s -w")
	kdir := t.TempDir()
	src, err := os.ReadFile("testdata/fakekubelet.go.txt")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(kdir, "main.go"), src, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(kdir, "go.mod"), []byte("module fakekubelet\n\ngo 1.22\n"), 0o644))
	coord := agenttest.New(t)
	files := t.TempDir()
	fsrv := httptest.NewServer(http.FileServer(http.Dir(files)))
	t.Cleanup(fsrv.Close)
	for _, v := range []string{"v1.33.0", "v1.34.0", "v1.35.0"} {
		hosttest.GoBuild(t, kdir, filepath.Join(files, "kubelet-"+v), "-ldflags=-s -w -X main.version="+v)
	}

	h := bootHost(t, ctx, rootfs, "molt-agent", "molt-agent", "kubelet")
	exec1 := func(argv ...string) string {
		t.Helper()
		out, err := h.Exec(ctx, argv...)
		require.NoError(t, err)
		return string(out)
	}

	// kubelet.service runs the stand-in on a free port (the host shares
	// this machine's loopback).
	port := freePort(t)
	require.NoError(t, h.CopyFile(filepath.Join(files, "kubelet-v1.33.0"), "/usr/bin/kubelet", 0o755))
	require.NoError(t, h.WriteFile("/etc/systemd/system/kubelet.service", []byte(fmt.Sprintf(
		"[Service]\nExecStart=/usr/bin/kubelet --port=%d\nRestart=always\nRestartSec=1\n", port)), 0o644))

	// Install the agent exactly as users do, from outside into the host's root.
	out, err := exec.Command("sh", "install.sh", "--root", h.Root(), "--binary", filepath.Join(bin, "molt-agent"),
		"coordinator="+coord.URL, "token="+coord.Token, "ca_pin="+coord.CAPin(), "cluster=c1", "node=n1",
		fmt.Sprintf("kubelet-healthz=http://127.0.0.1:%d/healthz", port),
		"health-timeout=20s", "poll-wait=1s", "log-level=debug",
		"test-hold-at=renamed", "test-hold-file=/run/molt-hold").CombinedOutput()
	require.NoError(t, err, string(out))
	require.FileExists(t, filepath.Join(h.Root(), "etc/systemd/system/multi-user.target.wants/molt-agent.service"))
	exec1("systemctl", "daemon-reload")
	exec1("systemctl", "start", "kubelet.service")

	// Unit control from outside through the host's D-Bus socket.
	units, err := systemd.Connect(ctx, "unix:path="+h.Root()+"/run/dbus/system_bus_socket")
	require.NoError(t, err)
	t.Cleanup(units.Close)

	// READY: `systemctl start` of a Type=notify unit returns once READY=1
	// arrived; the status line proves sd_notify reached this systemd.
	require.NoError(t, units.StartUnit(ctx, "molt-agent.service"))
	st, err := units.UnitState(ctx, "molt-agent.service")
	require.NoError(t, err)
	require.Equal(t, systemd.UnitState{Active: "active", Sub: "running"}, st)
	// STATUS= may follow READY=1 in a separate message: poll for it.
	require.Eventually(t, func() bool {
		o, _ := h.Exec(ctx, "systemctl", "show", "-p", "StatusText,Type", "molt-agent.service")
		return strings.Contains(string(o), "StatusText=running; coordinator")
	}, time.Minute, 50*time.Millisecond, "no status line")
	// The first watchdog ping is sent right after READY.
	require.Eventually(t, func() bool {
		o, _ := h.Exec(ctx, "systemctl", "show", "-p", "WatchdogTimestampMonotonic", "--value", "molt-agent.service")
		return strings.TrimSpace(string(o)) != "0" && strings.TrimSpace(string(o)) != ""
	}, time.Minute, 50*time.Millisecond, "no watchdog ping")

	// Upgrade: the agent replaces /usr/bin/kubelet and restarts kubelet.service.
	kubelet := filepath.Join(h.Root(), "usr/bin/kubelet")
	v1 := hosttest.FileSum(t, kubelet)
	v2 := hosttest.FileSum(t, filepath.Join(files, "kubelet-v1.34.0"))
	coord.Enqueue(api.Operation{ID: "up-1", Kind: api.OpUpgradeBinary, UpgradeBinary: &api.UpgradeBinary{
		Component: api.ComponentKubelet, Version: "v1.34.0", URL: fsrv.URL + "/kubelet-v1.34.0", SHA256: v2}})
	res := coord.WaitResult(t, "up-1", time.Minute)
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, "v1.34.0", res.Details["runningVersion"])
	require.Equal(t, v2, hosttest.FileSum(t, kubelet))
	require.Equal(t, v1, hosttest.FileSum(t, kubelet+".molt-prev"))
	require.NoError(t, units.WaitActive(ctx, "kubelet.service"))

	// Kill the agent mid-operation: the hold hook pauses it right after
	// the new binary was renamed into place, before the restart.
	require.NoError(t, h.WriteFile("/run/molt-hold", nil, 0o644))
	v3 := hosttest.FileSum(t, filepath.Join(files, "kubelet-v1.35.0"))
	coord.Enqueue(api.Operation{ID: "up-2", Kind: api.OpUpgradeBinary, UpgradeBinary: &api.UpgradeBinary{
		Component: api.ComponentKubelet, Version: "v1.35.0", URL: fsrv.URL + "/kubelet-v1.35.0", SHA256: v3}})
	journal := filepath.Join(h.Root(), "var/lib/molt-agent/journal.jsonl")
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(journal)
		return strings.Contains(string(b), `"id":"up-2","step":"renamed"`)
	}, time.Minute, 50*time.Millisecond, "agent never reached the renamed step")
	exec1("systemctl", "kill", "-s", "KILL", "molt-agent.service")
	require.Equal(t, v3, hosttest.FileSum(t, kubelet), "binary at the kill is the complete new one")
	require.NoError(t, os.Remove(filepath.Join(h.Root(), "run/molt-hold")))

	// Restart=on-failure brings the agent back; it resumes up-2.
	res = coord.WaitResult(t, "up-2", time.Minute)
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, "v1.35.0", res.Details["runningVersion"])
	require.Len(t, coord.ResultsFor("up-2"), 1)
	require.Equal(t, v3, hosttest.FileSum(t, kubelet))
	require.Equal(t, v2, hosttest.FileSum(t, kubelet+".molt-prev"), "backup not repeated: still the binary up-2 replaced")
	starts, err := os.ReadFile(filepath.Join(h.Root(), "var/lib/fake-kubelet/starts"))
	require.NoError(t, err)
	require.Equal(t, "v1.33.0\nv1.34.0\nv1.35.0\n", string(starts), "each version started exactly once")
	require.Contains(t, exec1("systemctl", "show", "-p", "NRestarts", "molt-agent.service"), "NRestarts=1")

	// Without READY the unit never becomes active: an agent whose config
	// is invalid exits before notifying, and `systemctl start` fails.
	env := filepath.Join(h.Root(), "etc/molt/agent.env")
	b, err := os.ReadFile(env)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(env, []byte(strings.ReplaceAll(string(b), "MOLT_AGENT_CLUSTER=c1\n", "")), 0o600))
	require.Error(t, units.RestartUnit(ctx, "molt-agent.service"))
	st, err = units.UnitState(ctx, "molt-agent.service")
	require.NoError(t, err)
	require.NotEqual(t, "active", st.Active)
}
