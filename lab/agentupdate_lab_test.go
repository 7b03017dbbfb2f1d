//go:build lab

package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/agenttest"
	"github.com/moltproject/molt/internal/hosttest"
	"github.com/moltproject/molt/internal/nspawn"
)

// TestAgentUpdatesItselfInNspawnHost runs molt-agent as the package
// installs it (/usr/bin/molt-agent, the unit of systemd/ with its
// ExecStart at /usr/bin: ProtectSystem=strict, the guard as
// ExecStartPre) in a booted Debian host under real systemd, against a
// stand-in coordinator (internal/agenttest) that serves the releases from
// its /artifacts/ and offers the molt step's operation:
//   - an agent of an older build (0.1.9) is replaced by 0.2.0: the
//     operation succeeds with the new release, which the unit runs from
//     /usr/bin and which its beats report; the old binary is kept;
//   - a release that exits at start (0.2.1) is put back by the guard
//     after two starts, with nobody touching the host: the operation
//     fails with the reason, and the unit runs 0.2.0 again.
//
// The coordinator's side of the molt step (a real cluster upgrade, hosts
// updated before any Kubernetes step, the deadline) is tested with
// simulated agents in coordinator/agentupdate_test.go, and on the lab's
// hosts in a real upgrade by TestMoltStepInLabUpgrade
// (moltstep_lab_test.go).
func TestAgentUpdatesItselfInNspawnHost(t *testing.T) {
	requireLabTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	repo := moduleRoot(t)
	dir := t.TempDir()
	build := func(version string) []byte {
		out := filepath.Join(dir, "molt-agent-"+version)
		hosttest.GoBuild(t, filepath.Join(repo, "cmd", "molt-agent"), out,
			"-ldflags=-X github.com/moltproject/molt/internal/version.Version="+version)
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		return b
	}
	t0 := time.Now()
	oldBin, newBin := build("0.1.9"), build("0.2.0")
	broken := []byte("#!/bin/sh\necho 'molt-agent 0.2.1: exits at start' >&2\nexit 1\n")
	t.Logf("two builds of molt-agent: %s", time.Since(t0).Round(time.Millisecond))

	coord := agenttest.New(t)
	newPath, newSum := coord.ServeArtifact("molt-agent-0.2.0", newBin)
	brokenPath, brokenSum := coord.ServeArtifact("molt-agent-0.2.1", broken)

	rootfs, err := nspawn.EnsureRootfs(ctx, nspawn.DefaultCacheDir())
	require.NoError(t, err)
	h := hosttest.Boot(t, ctx, nspawn.BootConfig{Name: fmt.Sprintf("mupd-%d", os.Getpid()), Rootfs: rootfs}, "molt-agent")
	run := func(argv ...string) string {
		t.Helper()
		out, err := h.Exec(ctx, argv...)
		require.NoError(t, err, "%s: %s", strings.Join(argv, " "), out)
		return string(out)
	}
	unit, err := os.ReadFile(filepath.Join(repo, "systemd", "molt-agent.service"))
	require.NoError(t, err)
	packaged := strings.Replace(string(unit), "ExecStart=/usr/local/bin/molt-agent", "ExecStart=/usr/bin/molt-agent", 1)
	require.NotEqual(t, string(unit), packaged)
	require.NoError(t, h.WriteFile("/usr/bin/molt-agent", oldBin, 0o755))
	require.NoError(t, h.WriteFile("/etc/systemd/system/molt-agent.service", []byte(packaged), 0o644))
	require.NoError(t, h.WriteFile("/etc/molt/agent.env", []byte(strings.Join([]string{
		"MOLT_AGENT_COORDINATOR=" + coord.URL, "MOLT_AGENT_CLUSTER=lab", "MOLT_AGENT_NODE=n1",
		"MOLT_AGENT_BOOTSTRAP_TOKEN=" + coord.Token, "MOLT_AGENT_CA_PIN=" + coord.CAPin(),
		"MOLT_AGENT_LISTEN=" + freeAddr(t), "MOLT_AGENT_POLL_WAIT=2s", "MOLT_AGENT_HEARTBEAT_INTERVAL=1s", ""}, "\n")), 0o600))
	run("systemctl", "daemon-reload")
	run("systemctl", "enable", "--now", "molt-agent.service")
	beats := func(version string) bool {
		for _, b := range coord.Heartbeats() {
			if b.AgentVersion == version {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return beats("0.1.9") }, time.Minute, 200*time.Millisecond, "the old agent never beat")
	version := func() string { return strings.TrimSpace(run("/usr/bin/molt-agent", "--version")) }
	require.Contains(t, version(), "molt 0.1.9")

	// The molt step's operation: 0.1.9 → 0.2.0.
	t1 := time.Now()
	coord.Enqueue(api.Operation{ID: "lab-1.34.4-1/n1/molt/a0", Kind: api.OpUpdateAgent,
		UpdateAgent: &api.UpdateAgent{Version: "0.2.0", URL: newPath, SHA256: newSum}})
	res := coord.WaitResult(t, "lab-1.34.4-1/n1/molt/a0", 3*time.Minute)
	t.Logf("0.1.9 → 0.2.0 reported after %s", time.Since(t1).Round(time.Millisecond))
	if res.State != api.OpSucceeded {
		diag, _ := h.Exec(ctx, "sh", "-c", "ls -la /usr/bin/ | grep molt; sha256sum /usr/bin/molt-agent /var/lib/molt-agent/molt-agent.prev; cat /var/lib/molt-agent/agent-update.json; /usr/bin/molt-agent --version; systemctl cat molt-agent.service | grep Exec; tail -c 3000 /var/lib/molt-agent/journal.jsonl")
		t.Logf("host:\n%s\nwanted %s", diag, newSum)
	}
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, "0.2.0", res.Details[api.DetailAgentVersion])
	require.Contains(t, version(), "molt 0.2.0")
	require.Equal(t, "active", strings.TrimSpace(run("systemctl", "show", "-p", "ActiveState", "--value", "molt-agent.service")))
	require.Equal(t, "/usr/bin/molt-agent", mainExe(t, run, h, "molt-agent.service"))
	require.Eventually(t, func() bool { return beats("0.2.0") }, time.Minute, 200*time.Millisecond, "the new agent's beats")
	kept, err := os.ReadFile(filepath.Join(h.Root(), "var/lib/molt-agent/molt-agent.prev"))
	require.NoError(t, err)
	require.Equal(t, oldBin, kept, "the previous agent is kept")

	// A release that exits at start: the guard puts 0.2.0 back.
	t2 := time.Now()
	coord.Enqueue(api.Operation{ID: "lab-1.34.5-1/n1/molt/a0", Kind: api.OpUpdateAgent,
		UpdateAgent: &api.UpdateAgent{Version: "0.2.1", URL: brokenPath, SHA256: brokenSum}})
	res = coord.WaitResult(t, "lab-1.34.5-1/n1/molt/a0", 3*time.Minute)
	t.Logf("0.2.1 (exits at start) rolled back and reported after %s", time.Since(t2).Round(time.Millisecond))
	require.Equal(t, api.OpFailed, res.State)
	require.Equal(t, "molt-agent 0.2.1 did not come up: systemd started it 2 times and it stopped each time before it ran; the kept molt-agent 0.2.0 was put back", res.Message)
	require.Equal(t, "0.2.0", res.Details[api.DetailAgentVersion])
	require.Contains(t, version(), "molt 0.2.0")
	require.Equal(t, "active", strings.TrimSpace(run("systemctl", "show", "-p", "ActiveState", "--value", "molt-agent.service")))
	journal, _ := h.Exec(ctx, "journalctl", "--no-pager", "-u", "molt-agent.service")
	require.Contains(t, string(journal), "molt-agent 0.2.1: exits at start", "the broken release did start")
	require.Contains(t, string(journal), "molt-agent guard: molt-agent 0.2.1 did not come up", "the guard put the kept agent back")
}
