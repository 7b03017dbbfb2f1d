//go:build lab

package lab

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/hosttest"
	"github.com/moltproject/molt/internal/nspawn"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/trust"
)

// TestReleasePackagesInNspawnHost makes the release (make release) and
// installs its two packages with dpkg -i in a booted Debian host, as an
// operator does (docs/release.md):
//   - SHA256SUMS verifies, and the binaries carry the VERSION file's
//     version and the commit;
//   - installed without configuration, neither unit is enabled or running,
//     and the postinst names the settings to make;
//   - configured (coordinator.env, then agent.env with a bootstrap token
//     and the pin of the member's CA) and enabled, the member runs from
//     /usr/bin and answers, and the agent runs and enrolls with it (its certificate appears);
//   - reinstalled, the configuration stays and the enabled units run again;
//   - dpkg -r stops both, removes the binaries, and leaves the data
//     directories and the configuration; dpkg --purge removes the
//     configuration and still leaves the data;
//   - install.sh --package installs, configures, enables and starts the
//     member again, on the data it left.
func TestReleasePackagesInNspawnHost(t *testing.T) {
	requireLabTools(t)
	testenv.RequireBinary(t, "make")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	repo := moduleRoot(t)

	t0 := time.Now()
	dist := hosttest.MakeRelease(t, repo, t.TempDir())
	t.Logf("make release: %s", time.Since(t0).Round(time.Millisecond))
	sums := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	sums.Dir = dist
	out, err := sums.CombinedOutput()
	require.NoError(t, err, "%s", out)
	vfile, err := os.ReadFile(filepath.Join(repo, "VERSION"))
	require.NoError(t, err)
	ver := strings.TrimSpace(string(vfile))
	out, err = exec.Command("go", "version", "-m", filepath.Join(dist, "bin", "molt-coordinator")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "internal/version.Version="+ver, "the linker set the version")
	require.Regexp(t, `internal/version\.Commit=[0-9a-f]{40}`, string(out), "the linker set the commit")
	debs := map[string]string{}
	for _, p := range []string{"molt-agent", "molt-coordinator"} {
		debs[p] = filepath.Join(dist, p+"_"+ver+"_amd64.deb")
		require.FileExists(t, debs[p])
	}

	rootfs, err := nspawn.EnsureRootfs(ctx, nspawn.DefaultCacheDir())
	require.NoError(t, err)
	h := hosttest.Boot(t, ctx, nspawn.BootConfig{Name: fmt.Sprintf("mrel-%d", os.Getpid()), Rootfs: rootfs},
		"molt-agent", "molt-coordinator")
	run := func(argv ...string) string {
		t.Helper()
		out, err := h.Exec(ctx, argv...)
		require.NoError(t, err)
		return string(out)
	}
	// state is a unit's enablement and ActiveState/SubState.
	state := func(unit string) string {
		t.Helper()
		en, _ := h.Exec(ctx, "systemctl", "is-enabled", unit) // exits 1 when disabled
		return strings.TrimSpace(string(en)) + " " + strings.TrimSpace(strings.ReplaceAll(
			run("systemctl", "show", "-p", "ActiveState", "--value", unit)+"/"+
				run("systemctl", "show", "-p", "SubState", "--value", unit), "\n", ""))
	}
	install := func() string {
		t.Helper()
		for p, deb := range debs {
			require.NoError(t, h.CopyFile(deb, "/tmp/"+p+".deb", 0o644))
		}
		return run("dpkg", "-i", "/tmp/molt-agent.deb", "/tmp/molt-coordinator.deb")
	}

	// Installed without configuration: nothing enabled, nothing running.
	out1 := install()
	t.Logf("dpkg -i:\n%s", out1)
	require.Contains(t, out1, "molt-coordinator.service not enabled: /etc/molt/coordinator.env does not set MOLT_COORDINATOR_HTTP_ADDR MOLT_COORDINATOR_RAFT_ADDR")
	require.Contains(t, out1, "molt-agent.service not enabled: /etc/molt/agent.env does not set MOLT_AGENT_COORDINATOR MOLT_AGENT_CLUSTER")
	for _, u := range []string{"molt-agent.service", "molt-coordinator.service"} {
		require.Equal(t, "disabled inactive/dead", state(u), u)
	}
	for _, f := range []string{"usr/bin/molt-agent", "usr/bin/molt-coordinator"} {
		require.FileExists(t, filepath.Join(h.Root(), f))
	}

	// The member, configured and enabled. The host shares this machine's
	// loopback: free ports from here.
	httpAddr, raftAddr := freeAddr(t), freeAddr(t)
	require.NoError(t, h.WriteFile("/etc/molt/coordinator.env", []byte(
		"MOLT_COORDINATOR_HTTP_ADDR="+httpAddr+"\nMOLT_COORDINATOR_RAFT_ADDR="+raftAddr+"\nMOLT_COORDINATOR_NODE_ID=rel-1\n"), 0o600))
	run("systemctl", "enable", "--now", "molt-coordinator.service") // Type=notify: returns once READY
	require.Equal(t, "enabled active/running", state("molt-coordinator.service"))
	require.Equal(t, "/usr/bin/molt-coordinator", mainExe(t, run, h, "molt-coordinator.service"))
	data := filepath.Join(h.Root(), "var/lib/private/molt-coordinator")
	require.FileExists(t, filepath.Join(data, "admin.token"))
	caPEM, err := os.ReadFile(filepath.Join(data, "tls", "ca.crt"))
	require.NoError(t, err)
	ca, err := trust.ParseCert(caPEM)
	require.NoError(t, err)
	ctl := func(args ...string) string {
		t.Helper()
		argv := append([]string{"--server", "https://" + httpAddr, "--ca-file", filepath.Join(data, "tls", "ca.crt"),
			"--token-file", filepath.Join(data, "admin.token")}, args...)
		out, err := exec.CommandContext(ctx, filepath.Join(dist, "bin", "moltctl"), argv...).CombinedOutput()
		require.NoError(t, err, "moltctl %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	require.Contains(t, ctl("member", "list"), "rel-1")

	// The agent's cluster, registered: an agent enrolls as a node of a
	// cluster the coordinator knows.
	spec := filepath.Join(t.TempDir(), "rel.yaml")
	require.NoError(t, os.WriteFile(spec, []byte("name: rel\nkind: standalone\nchannel: regular\nversion: \"1.33.6\"\n"+
		"pools:\n  - name: cp\n    role: controlPlane\n    nodes: [{name: rel-node, address: 127.0.0.1}]\n"), 0o600))
	ctl("cluster", "apply", "-f", spec)

	// The agent, configured with a bootstrap token and the CA's pin, and
	// enabled: it runs and enrolls (its certificate appears).
	token := strings.SplitN(ctl("token", "create", "--cluster", "rel", "--uses", "1", "--ttl", "1h"), "\n", 2)[0]
	require.NotEmpty(t, token)
	require.NoError(t, h.WriteFile("/etc/molt/agent.env", []byte(strings.Join([]string{
		"MOLT_AGENT_COORDINATOR=https://" + httpAddr, "MOLT_AGENT_CLUSTER=rel", "MOLT_AGENT_NODE=rel-node",
		"MOLT_AGENT_BOOTSTRAP_TOKEN=" + token, "MOLT_AGENT_CA_PIN=" + trust.Pin(ca), "MOLT_AGENT_LISTEN=" + freeAddr(t), ""}, "\n")), 0o600))
	run("systemctl", "enable", "--now", "molt-agent.service")
	require.Equal(t, "enabled active/running", state("molt-agent.service"))
	require.Equal(t, "/usr/bin/molt-agent", mainExe(t, run, h, "molt-agent.service"))
	agentData := filepath.Join(h.Root(), "var/lib/molt-agent")
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(agentData, "tls", "agent.pem")) // its certificate and key, once enrolled
		return err == nil
	}, time.Minute, 200*time.Millisecond, "the agent never enrolled")

	// Reinstalled (as an upgrade to the same version is): the operator's
	// configuration stays, and the enabled units run again.
	pidBefore := run("systemctl", "show", "-p", "MainPID", "--value", "molt-coordinator.service")
	install()
	env, err := os.ReadFile(filepath.Join(h.Root(), "etc/molt/coordinator.env"))
	require.NoError(t, err)
	require.Contains(t, string(env), "MOLT_COORDINATOR_HTTP_ADDR="+httpAddr, "the conffile the operator edited is kept")
	require.Equal(t, "enabled active/running", state("molt-coordinator.service"))
	require.Equal(t, "enabled active/running", state("molt-agent.service"))
	require.NotEqual(t, pidBefore, run("systemctl", "show", "-p", "MainPID", "--value", "molt-coordinator.service"), "restarted on the new binary")

	// dpkg -r: stopped, binaries gone, data and configuration left.
	out = []byte(run("dpkg", "-r", "molt-agent", "molt-coordinator"))
	t.Logf("dpkg -r:\n%s", out)
	for _, u := range []string{"molt-agent.service", "molt-coordinator.service"} {
		active := strings.TrimSpace(run("systemctl", "show", "-p", "ActiveState", "--value", u))
		require.Equal(t, "inactive", active, u)
	}
	for _, f := range []string{"usr/bin/molt-agent", "usr/bin/molt-coordinator"} {
		require.NoFileExists(t, filepath.Join(h.Root(), f))
	}
	require.FileExists(t, filepath.Join(data, "admin.token"), "the member's data directory is left")
	require.True(t, raftstore.HasState(data), "the member's Raft state is left")
	require.DirExists(t, filepath.Join(agentData, "tls"), "the agent's data directory is left")
	require.FileExists(t, filepath.Join(h.Root(), "etc/molt/agent.env"), "remove keeps the configuration")

	// dpkg --purge: the configuration goes, the data stays.
	out = []byte(run("dpkg", "--purge", "molt-agent", "molt-coordinator"))
	t.Logf("dpkg --purge:\n%s", out)
	require.Contains(t, string(out), "molt-coordinator: purged; its data stays in /var/lib/private/molt-coordinator")
	require.NoFileExists(t, filepath.Join(h.Root(), "etc/molt/agent.env"))
	require.NoFileExists(t, filepath.Join(h.Root(), "etc/molt/coordinator.env"))
	require.NoFileExists(t, filepath.Join(h.Root(), "etc/systemd/system/multi-user.target.wants/molt-agent.service"))
	require.FileExists(t, filepath.Join(data, "admin.token"), "purge leaves the member's data")
	require.DirExists(t, filepath.Join(agentData, "tls"), "purge leaves the agent's data")

	// install.sh --package, as the Vagrant provisioning runs it: the
	// package, its settings, enabled and started; the member comes back
	// on the data it left.
	require.NoError(t, h.CopyFile(filepath.Join(repo, "systemd", "install.sh"), "/tmp/install.sh", 0o755))
	out = []byte(run("sh", "/tmp/install.sh", "coordinator", "--package", "/tmp/molt-coordinator.deb", "--start",
		"http-addr="+httpAddr, "raft-addr="+raftAddr, "node-id=rel-1"))
	t.Logf("install.sh --package:\n%s", out)
	require.Equal(t, "enabled active/running", state("molt-coordinator.service"))
	require.Equal(t, "/usr/bin/molt-coordinator", mainExe(t, run, h, "molt-coordinator.service"))
	require.Contains(t, ctl("member", "list"), "rel-1", "the member answers with the admin token it kept")
}

// mainExe is the binary a unit's main process runs.
func mainExe(t *testing.T, run func(...string) string, h *nspawn.Host, unit string) string {
	t.Helper()
	pid := strings.TrimSpace(run("systemctl", "show", "-p", "MainPID", "--value", unit))
	require.NotEqual(t, "0", pid, unit)
	return strings.TrimSpace(run("readlink", "/proc/"+pid+"/exe"))
}

// freeAddr is a free 127.0.0.1 port on this machine's loopback.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
