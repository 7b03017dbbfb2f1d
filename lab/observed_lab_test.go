//go:build lab

package lab_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/e2e"
	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/moltproject/molt/lab"
)

// TestObservedVersionsInLab: molt believes what the lab's hosts run
// (docs/api.md#observed-versions-and-drift), on the small lab at 1.33.13
// with one coordinator member and the lab's Prometheus.
//
//   - Registering another cluster over the same hosts as 1.34.4 is
//     refused (422, rule cluster-version-observed, every node's 1.33.13
//     in the detail); with adopt it is registered at 1.33.13.
//   - worker-1's kubelet replaced by hand (1.34.3's binary, the unit
//     restarted) shows as drift on the node, holds the automatic upgrade
//     back with a drift block naming worker-1, and MoltNodeVersionDrift
//     fires in the lab's Prometheus (its for: shortened to 10 s; the
//     shipped 2 m is the promtool test's).
func TestObservedVersionsInLab(t *testing.T) {
	testenv.RequireRoot(t)
	for _, b := range []string{"systemd-nspawn", "ip", "nsenter", "debootstrap", "go", "prometheus"} {
		testenv.RequireBinary(t, b)
	}
	const at, other = "1.33.13", "1.34.3"
	builds := cachedir.Build()
	for _, v := range []string{at, other} {
		testenv.RequireFile(t, filepath.Join(cachedir.K8sBin(builds, v), "kubelet"), "kubelet ("+cachedir.K8sBuildOf(v).Command()+")")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := repoRoot(t)
	vb, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	bin := buildCurrent(t, root, strings.TrimSpace(string(vb)))

	lcfg := lab.DefaultConfig()
	lcfg.Topology = lab.SmallTopology()
	lcfg.Version = at
	lcfg.Cache = cachedir.Lab()
	lcfg.BuildCache = builds
	lcfg.StateDir = filepath.Join(t.TempDir(), "lab")
	lcfg.ModuleDir = root
	lcfg.Prefix = "mlabo-"
	lcfg.Log = slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lcfg.Out = tlog{t}
	stale, err := lab.New(lcfg)
	require.NoError(t, err)
	require.NoError(t, stale.Down(ctx))
	t0 := time.Now()
	env, err := e2e.Up(ctx, e2e.Config{
		Lab: lcfg, BinDir: bin, WorkDir: t.TempDir(), Members: 1, BasePort: 7380,
		Releases: []string{other}, Out: tlog{t}, AlertFor: 10 * time.Second,
	})
	t.Cleanup(func() {
		if env == nil {
			return
		}
		require.NoError(t, env.Down(context.Background()))
		out, err := exec.Command("ip", "netns", "list").CombinedOutput()
		require.NoError(t, err)
		require.NotContains(t, string(out), lcfg.Prefix, "the lab's namespaces are gone")
	})
	require.NoError(t, err)
	t.Logf("lab up with coordinator, agents and prometheus: %s", time.Since(t0).Round(time.Millisecond))

	// Registration: the stated version against the Nodes' kubelets.
	kc, err := os.ReadFile(env.Lab.Kubeconfig())
	require.NoError(t, err)
	spec := api.ClusterSpec{Name: "stated", Kind: api.ClusterStandalone, Version: "1.34.4", Kubeconfig: string(kc)}
	for _, h := range env.Lab.Config().Topology.Hosts {
		spec.Pools = append(spec.Pools, api.Pool{Name: h.Name, Role: api.Role(h.Role), Nodes: []api.Node{{Name: h.Name, Address: h.IP}}})
	}
	_, err = env.API().Do(ctx, http.MethodPut, "/v1/clusters/stated", spec, nil)
	var p *api.Problem
	require.True(t, errors.As(err, &p), "refused with a problem: %v", err)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Error())
	require.Equal(t, "cluster-version-observed", p.Rule, p.Error())
	for _, h := range env.Lab.Config().Topology.Hosts {
		require.Contains(t, p.Detail, h.Name, "the detail names every node")
	}
	require.Contains(t, p.Detail, at)
	t.Logf("stated 1.34.4 over hosts at %s: %s", at, p.Error())
	_, err = env.API().Do(ctx, http.MethodGet, "/v1/clusters/stated", nil, nil)
	require.Error(t, err, "nothing stored")
	spec.Adopt = true
	_, err = env.API().Do(ctx, http.MethodPut, "/v1/clusters/stated", spec, nil)
	require.NoError(t, err)
	var adopted api.Cluster
	_, err = env.API().Do(ctx, http.MethodGet, "/v1/clusters/stated", nil, &adopted)
	require.NoError(t, err)
	require.Equal(t, at, adopted.Spec.Version, "adopted at the observed version")
	require.Equal(t, at, adopted.Status.Version)
	_, err = env.API().Do(ctx, http.MethodDelete, "/v1/clusters/stated", nil, nil)
	require.NoError(t, err)

	// Every agent reports 1.33.13: no drift yet.
	c, err := env.Cluster(ctx)
	require.NoError(t, err)
	for _, a := range c.Status.Agents {
		require.Equal(t, at, strings.TrimPrefix(a.Kubelet, "v"), a.Node)
		require.Empty(t, a.Drift, a.Node)
	}

	// worker-1's kubelet replaced by hand.
	h, err := env.Lab.Host("worker-1")
	require.NoError(t, err)
	stopped := time.Now()
	_, err = h.Exec(ctx, "systemctl", "stop", "kubelet.service")
	require.NoError(t, err)
	require.NoError(t, h.CopyFile(filepath.Join(cachedir.K8sBin(builds, other), "kubelet"), lab.KubeletBinary, 0o755))
	copied := time.Now()
	_, err = h.Exec(ctx, "systemctl", "start", "kubelet.service")
	require.NoError(t, err)
	restarted := time.Now()
	var drift string
	require.NoError(t, pollT(ctx, time.Minute, func() bool {
		c, err := env.Cluster(ctx)
		if err != nil {
			return false
		}
		for _, a := range c.Status.Agents {
			if a.Node == "worker-1" {
				drift = a.Drift
			}
		}
		return drift != ""
	}), "worker-1 shows as drift within a minute")
	// The agent reads the kubelet's version from its binary at each beat,
	// so the drift can show before the unit is started again: measured
	// from the kubelet's stop, the binary's replacement and its restart.
	now := time.Now()
	t.Logf("MEASURED drift shown %s after the kubelet's stop, %s after the binary was replaced, %s after its restart: %s",
		now.Sub(stopped).Round(time.Millisecond), now.Sub(copied).Round(time.Millisecond), now.Sub(restarted).Round(time.Millisecond), drift)
	require.Contains(t, drift, other)

	// The automatic upgrade to 1.34.3, in an open window, is held back.
	_, err = env.API().Do(ctx, http.MethodPut, "/v1/clusters/"+e2e.ClusterName+"/maintenance-policy", openWindow(), nil)
	require.NoError(t, err)
	_, err = env.API().Do(ctx, http.MethodPut, "/v1/channels/regular", api.ChannelUpdate{AutoUpgradeTarget: other}, nil)
	require.NoError(t, err)
	var st api.UpgradeStatus
	var block *api.UpgradeBlock
	require.NoError(t, pollT(ctx, time.Minute, func() bool {
		st, err = env.UpgradeStatus(ctx)
		if err != nil {
			return false
		}
		for i, b := range st.BlockedBy {
			if b.Kind == api.BlockDrift {
				block = &st.BlockedBy[i]
			}
		}
		return block != nil
	}), "upgrade-status lists a drift block: %+v", st)
	require.Equal(t, "worker-1", block.Name)
	require.Equal(t, api.AutoBlockedByRule, st.State, st.Message)
	require.Equal(t, other, st.Next)
	t.Logf("upgrade-status: %s — %s; blockedBy %+v", st.State, st.Message, st.BlockedBy)

	// The alert fires in the lab's Prometheus.
	var firing map[string]string
	require.NoError(t, pollT(ctx, time.Minute, func() bool {
		firing, err = env.Query(ctx, `ALERTS{alertname="MoltNodeVersionDrift",alertstate="firing"}`)
		return err == nil && len(firing) > 0
	}), "MoltNodeVersionDrift fires: %v", err)
	t.Logf("MEASURED MoltNodeVersionDrift firing %s after the binary was replaced: %v", time.Since(copied).Round(time.Millisecond), firing)
	require.Len(t, firing, 1)
	for labels := range firing {
		require.Contains(t, labels, "node=worker-1")
		require.Contains(t, labels, "cluster="+e2e.ClusterName)
	}
	c, err = env.Cluster(ctx)
	require.NoError(t, err)
	require.False(t, c.Status.Version == other, "nothing upgraded the cluster")
	st, err = env.UpgradeStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, api.AutoBlockedByRule, st.State, "still held back: %s", st.Message)
	t.Logf("test body: %s", time.Since(began).Round(time.Millisecond))
}

// openWindow is a maintenance policy whose daily 6-hour window opened an
// hour ago.
func openWindow() api.MaintenancePolicy {
	s := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	return api.MaintenancePolicy{Window: &api.MaintenanceWindow{Start: s, End: s.Add(6 * time.Hour), Recurrence: "FREQ=DAILY"}}
}

// pollT calls cond every 500 ms until it holds or timeout passes.
func pollT(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
