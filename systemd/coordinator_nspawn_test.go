package systemd_test

import (
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
	"github.com/moltproject/molt/internal/hosttest"
	"github.com/moltproject/molt/systemd"
	"github.com/moltproject/molt/trust"
)

// TestCoordinatorUnderSystemd installs a coordinator member with
// install.sh exactly as an operator does, in a booted nspawn host, and
// checks that the unit really configures the binary: the member listens
// where coordinator.env says, keeps its Raft state in the unit's state
// directory (as the transient DynamicUser, not root), reports READY, and
// comes back from a restart with the state it had.
func TestCoordinatorUnderSystemd(t *testing.T) {
	ctx, rootfs := requireHosts(t)
	bin := t.TempDir()
	hosttest.GoBuild(t, "../cmd/molt-coordinator", filepath.Join(bin, "molt-coordinator"), "-ldflags=-s -w")

	h := bootHost(t, ctx, rootfs, "molt-coord", "molt-coordinator")

	// The host shares this machine's loopback: free ports from here.
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	raftAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	out, err := exec.Command("sh", "install.sh", "coordinator", "--root", h.Root(), "--binary", filepath.Join(bin, "molt-coordinator"),
		"http-addr="+httpAddr, "raft-addr="+raftAddr, "node-id=coord-1", "log-level=debug").CombinedOutput()
	require.NoError(t, err, string(out))
	env, err := os.ReadFile(filepath.Join(h.Root(), "etc/molt/coordinator.env"))
	require.NoError(t, err)
	require.Contains(t, string(env), "MOLT_COORDINATOR_HTTP_ADDR="+httpAddr+"\n")
	st, err := os.Stat(filepath.Join(h.Root(), "etc/molt/coordinator.env"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	require.FileExists(t, filepath.Join(h.Root(), "etc/systemd/system/multi-user.target.wants/molt-coordinator.service"))
	_, err = h.Exec(ctx, "systemctl", "daemon-reload")
	require.NoError(t, err)

	units, err := systemd.Connect(ctx, "unix:path="+h.Root()+"/run/dbus/system_bus_socket")
	require.NoError(t, err)
	t.Cleanup(units.Close)
	// Type=notify: StartUnit returns once the member sent READY=1.
	require.NoError(t, units.StartUnit(ctx, "molt-coordinator.service"))
	us, err := units.UnitState(ctx, "molt-coordinator.service")
	require.NoError(t, err)
	require.Equal(t, systemd.UnitState{Active: "active", Sub: "running"}, us)

	// The member made its CA and first admin token in its state
	// directory; the client trusts the one and presents the other.
	state := filepath.Join(h.Root(), "var/lib/private/molt-coordinator")
	caPEM, err := os.ReadFile(filepath.Join(state, "tls", "ca.crt"))
	require.NoError(t, err)
	ca, err := trust.ParseCert(caPEM)
	require.NoError(t, err)
	tok, err := os.ReadFile(filepath.Join(state, "admin.token"))
	require.NoError(t, err)
	st, err = os.Stat(filepath.Join(state, "admin.token"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the admin token is the owner's alone")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cl := client.New("https://"+httpAddr, &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: trust.ClientConfig(pool, nil)}})
	cl.SetBearerToken(strings.TrimSpace(string(tok)))
	// Plain HTTP reaches no handler.
	resp, err := http.Get("http://" + httpAddr + "/v1/members")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a plain HTTP request to the TLS port")
	var members []api.Member
	require.Eventually(t, func() bool {
		members = nil
		_, err := cl.Do(ctx, http.MethodGet, "/v1/members", nil, &members)
		return err == nil && len(members) == 1 && members[0].Leader
	}, time.Minute, 50*time.Millisecond, "the member never led on %s", httpAddr)
	require.Equal(t, "coord-1", members[0].ID, "node-id from coordinator.env")
	require.Equal(t, raftAddr, members[0].RaftAddr, "raft-addr from coordinator.env")

	// The state lives in the unit's StateDirectory, owned by the dynamic user.
	o, err := h.Exec(ctx, "sh", "-c", "stat -c %U /var/lib/private/molt-coordinator/wal && readlink /var/lib/molt-coordinator")
	require.NoError(t, err, string(o))
	require.NotContains(t, strings.Fields(string(o))[0], "root")
	require.Contains(t, string(o), "private/molt-coordinator")

	// A restart keeps what was written.
	rel := api.Release{Version: "1.34.4", Components: api.ReleaseComponents{
		Kubelet:    api.BinaryArtifact{URL: "http://artifacts.invalid/kubelet", SHA256: strings.Repeat("a", 64)},
		Containerd: api.BinaryArtifact{URL: "http://artifacts.invalid/containerd", SHA256: strings.Repeat("b", 64), Version: "1.7.0"},
	}}
	_, err = cl.Do(ctx, http.MethodPut, "/v1/releases/1.34.4", rel, nil)
	require.NoError(t, err)
	require.NoError(t, units.RestartUnit(ctx, "molt-coordinator.service"))
	require.Eventually(t, func() bool {
		_, err := cl.Do(ctx, http.MethodGet, "/v1/releases/1.34.4", nil, nil)
		return err == nil
	}, time.Minute, 50*time.Millisecond, "release lost across a restart")
}
