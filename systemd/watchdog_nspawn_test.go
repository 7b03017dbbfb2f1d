package systemd_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/internal/agenttest"
	"github.com/moltproject/molt/internal/hosttest"
	"github.com/moltproject/molt/internal/nspawn"
	"github.com/moltproject/molt/systemd"
	"github.com/moltproject/molt/trust"
)

// watchdogDropIn shortens each unit's watchdog, so a wedge is found in
// seconds: the daemons take WatchdogSec as the slack of their loops'
// bounds, and systemd kills one that stopped pinging after it.
const watchdogDropIn = "[Service]\nWatchdogSec=2s\nRestartSec=1s\n"

// TestWatchdogRestartsWedgedDaemons wedges a loop of a real agent and the
// Raft apply loop of a real coordinator member, each running under the
// systemd of one booted host as installed by install.sh, and sees systemd
// restart each for a watchdog timeout — then the restarted daemon works.
// The binaries are the fault builds (-tags faults): a test file in the
// daemon's state directory wedges a loop once (cmd/*/faults.go).
func TestWatchdogRestartsWedgedDaemons(t *testing.T) {
	_, rootfs := requireHosts(t)
	// Longer than requireHosts' context: two builds, and each subtest may
	// wait its full time for a restart before it fails.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(cancel)
	bin := t.TempDir()
	hosttest.GoBuild(t, "../cmd/molt-agent", filepath.Join(bin, "molt-agent"), "-tags=faults", "-ldflags=-s -w")
	hosttest.GoBuild(t, "../cmd/molt-coordinator", filepath.Join(bin, "molt-coordinator"), "-tags=faults", "-ldflags=-s -w")
	h := bootHost(t, ctx, rootfs, "molt-wd", "molt-agent", "molt-coordinator")
	units, err := systemd.Connect(ctx, "unix:path="+h.Root()+"/run/dbus/system_bus_socket")
	require.NoError(t, err)
	t.Cleanup(units.Close)

	t.Run("agent", func(t *testing.T) {
		coord := agenttest.New(t)
		install(t, h, "agent", filepath.Join(bin, "molt-agent"),
			"coordinator="+coord.URL, "token="+coord.Token, "ca_pin="+coord.CAPin(), "cluster=c1", "node=n1", "poll-wait=1s", "log-level=debug")
		require.NoError(t, units.StartUnit(ctx, "molt-agent.service"))
		require.Eventually(t, func() bool { return len(coord.Heartbeats()) > 0 }, time.Minute, 50*time.Millisecond, "no heartbeat")
		pid := mainPID(t, ctx, h, "molt-agent.service")

		// The heartbeat loop blocks at its next iteration; the watchdog
		// goroutine would go on pinging, but the agent stops it.
		require.NoError(t, h.WriteFile("/var/lib/molt-agent/test-wedge", []byte("heartbeat"), 0o600))
		seeRestart(t, ctx, h, "molt-agent.service", pid, "/var/lib/molt-agent/test-wedge", "loops=heartbeat")
		n := len(coord.Heartbeats())
		require.Eventually(t, func() bool { return len(coord.Heartbeats()) > n }, time.Minute, 50*time.Millisecond, "the restarted agent heartbeats")
		require.NoError(t, units.StopUnit(ctx, "molt-agent.service"))
	})

	t.Run("coordinator", func(t *testing.T) {
		httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		raftAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		install(t, h, "coordinator", filepath.Join(bin, "molt-coordinator"),
			"http-addr="+httpAddr, "raft-addr="+raftAddr, "node-id=coord-1")
		require.NoError(t, units.StartUnit(ctx, "molt-coordinator.service"))
		state := filepath.Join(h.Root(), "var/lib/private/molt-coordinator")
		caPEM, err := os.ReadFile(filepath.Join(state, "tls", "ca.crt"))
		require.NoError(t, err)
		ca, err := trust.ParseCert(caPEM)
		require.NoError(t, err)
		tok, err := os.ReadFile(filepath.Join(state, "admin.token"))
		require.NoError(t, err)
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		cl := client.New("https://"+httpAddr, &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: trust.ClientConfig(pool, nil)}})
		cl.SetBearerToken(strings.TrimSpace(string(tok)))
		require.Eventually(t, func() bool {
			var ms []api.Member
			_, err := cl.Do(ctx, http.MethodGet, "/v1/members", nil, &ms)
			return err == nil && len(ms) == 1 && ms[0].Leader
		}, time.Minute, 50*time.Millisecond, "the member never led")
		pid := mainPID(t, ctx, h, "molt-coordinator.service")

		// The next Apply never returns: the write that commits it gets no
		// answer (the client gives up), and the member stops pinging.
		require.NoError(t, os.WriteFile(filepath.Join(state, "test-wedge"), nil, 0o600))
		rel := api.Release{Version: "1.34.4", Components: api.ReleaseComponents{
			Kubelet:    api.BinaryArtifact{URL: "http://artifacts.invalid/kubelet", SHA256: strings.Repeat("a", 64)},
			Containerd: api.BinaryArtifact{URL: "http://artifacts.invalid/containerd", SHA256: strings.Repeat("b", 64), Version: "1.7.0"},
		}}
		go func() { _, _ = cl.Do(ctx, http.MethodPut, "/v1/releases/1.34.4", rel, nil) }()
		seeRestart(t, ctx, h, "molt-coordinator.service", pid, "/var/lib/private/molt-coordinator/test-wedge", "raft apply loop made no progress")
		// The entry was committed before the wedge: the restarted member
		// applies it from its log.
		require.Eventually(t, func() bool {
			_, err := cl.Do(ctx, http.MethodGet, "/v1/releases/1.34.4", nil, nil)
			return err == nil
		}, time.Minute, 100*time.Millisecond, "the restarted member serves the release committed before the wedge")
		require.NoError(t, units.StopUnit(ctx, "molt-coordinator.service"))
	})
}

// install runs install.sh for component into the host, with the short
// watchdog drop-in, and reloads systemd.
func install(t *testing.T, h *nspawn.Host, component, binary string, kv ...string) {
	t.Helper()
	args := append([]string{"install.sh", component, "--root", h.Root(), "--binary", binary}, kv...)
	out, err := exec.Command("sh", args...).CombinedOutput()
	require.NoError(t, err, string(out))
	require.NoError(t, h.WriteFile("/etc/systemd/system/molt-"+component+".service.d/watchdog.conf", []byte(watchdogDropIn), 0o644))
	_, err = h.Exec(context.Background(), "systemctl", "daemon-reload")
	require.NoError(t, err)
}

// show returns a unit property's value.
func show(t *testing.T, ctx context.Context, h *nspawn.Host, unit, prop string) string {
	t.Helper()
	o, err := h.Exec(ctx, "systemctl", "show", "-p", prop, "--value", unit)
	require.NoError(t, err, string(o))
	return strings.TrimSpace(string(o))
}

func mainPID(t *testing.T, ctx context.Context, h *nspawn.Host, unit string) string {
	t.Helper()
	pid := show(t, ctx, h, unit, "MainPID")
	require.NotEqual(t, "0", pid)
	require.Equal(t, "0", show(t, ctx, h, unit, "NRestarts"))
	require.Equal(t, "2s", show(t, ctx, h, unit, "WatchdogUSec"), "the drop-in's WatchdogSec")
	return pid
}

// seeRestart waits until the daemon took the wedge (removed wedgeFile),
// then until systemd restarted unit for a watchdog timeout: NRestarts 1,
// another main PID, active again, and the journal naming the timeout and
// the daemon's own account (logged, a line containing said).
func seeRestart(t *testing.T, ctx context.Context, h *nspawn.Host, unit, oldPID, wedgeFile, said string) {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(h.Root(), wedgeFile))
		return os.IsNotExist(err)
	}, time.Minute, 50*time.Millisecond, "the daemon never took the wedge")
	wedged := time.Now()
	// The agent's heartbeat loop is judged after its bound (38 s with the
	// defaults) plus the slack; systemd acts WatchdogSec later.
	require.Eventually(t, func() bool {
		return show(t, ctx, h, unit, "NRestarts") == "1"
	}, 2*time.Minute, 100*time.Millisecond, "systemd never restarted the wedged %s", unit)
	restarted := time.Now()
	require.Eventually(t, func() bool {
		return show(t, ctx, h, unit, "ActiveState") == "active"
	}, time.Minute, 50*time.Millisecond)
	require.NotEqual(t, oldPID, show(t, ctx, h, unit, "MainPID"))
	o, err := h.Exec(ctx, "journalctl", "--no-pager", "-u", unit)
	require.NoError(t, err)
	require.Contains(t, string(o), "Watchdog timeout", "systemd's reason for the restart")
	require.Contains(t, string(o), said, "the daemon's account of the wedge")
	// systemd's SIGABRT makes the Go runtime dump the goroutines: the
	// wedged one is there, blocked in the fault hook.
	require.Contains(t, string(o), "SIGABRT")
	require.Contains(t, string(o), "main.wedgeHook", "the dump shows where the loop hung")
	t.Logf("MEASURED %s: wedge taken %.1fs after it was asked, restarted %.1fs after it took it", unit,
		wedged.Sub(start).Seconds(), restarted.Sub(wedged).Seconds())
}
