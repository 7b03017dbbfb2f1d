//go:build lab

package lab_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/e2e"
	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/moltproject/molt/lab"
	"github.com/moltproject/molt/phases"
)

// TestObservedVersionsInLab: molt believes what the lab's hosts run
// (docs/api.md, "Observed versions and drift"), on the small lab (cplb-1,
// cp-1, worker-1) at 1.33.13 with one coordinator member, agents and the
// lab's Prometheus evaluating molt's alert rules (every for: 5 s).
//
//   - Registration: the same hosts registered again, under another name,
//     as 1.34.4 are refused (rule cluster-version-observed, every node's
//     1.33.13 in the problem) and nothing is stored; asked to adopt, the
//     cluster is registered at 1.33.13.
//   - Drift: worker-1's kubelet replaced by hand with 1.34.4's (the binary
//     copied over /usr/bin/kubelet, the kubelet restarted) shows on the
//     node within a minute, sets molt_node_version_drift, fires
//     MoltNodeVersionDrift in the lab's Prometheus, and holds back the
//     automatic upgrade to 1.34.4 that the channel then asks for, with a
//     drift block naming worker-1 as the only block. Put back by hand, the
//     drift ends and the scheduler starts that upgrade by itself.
func TestObservedVersionsInLab(t *testing.T) {
	testenv.RequireRoot(t)
	for _, b := range []string{"systemd-nspawn", "ip", "nsenter", "debootstrap", "go", "git", "prometheus"} {
		testenv.RequireBinary(t, b)
	}
	const at, to = "1.33.13", "1.34.4"
	builds := cachedir.Build()
	for _, v := range []string{at, to} {
		testenv.RequireFile(t, filepath.Join(cachedir.K8sBin(builds, v), "kubelet"), "kubelet ("+cachedir.K8sBuildOf(v).Command()+")")
	}
	for _, v := range []string{at, to} {
		ev := lab.EtcdVersionFor(v)
		testenv.RequireFile(t, filepath.Join(builds, "etcd", "v"+ev, "bin", "etcd"), "etcd "+ev+" (build/k8s/etcd.sh "+ev+")")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root := repoRoot(t)
	vb, err := os.ReadFile(filepath.Join(root, "VERSION"))
	require.NoError(t, err)
	t0 := time.Now()
	bin := buildCurrent(t, root, strings.TrimSpace(string(vb)))
	t.Logf("build: %s", time.Since(t0).Round(time.Millisecond))

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
	work := t.TempDir()
	t0 = time.Now()
	env, err := e2e.Up(ctx, e2e.Config{
		Lab: lcfg, BinDir: bin, WorkDir: work, Members: 1, BasePort: 7380,
		Releases: []string{to}, Out: tlog{t}, AlertFor: 5 * time.Second,
	})
	t.Cleanup(func() {
		if env == nil {
			return
		}
		if t.Failed() {
			dumpMoltStep(t, env, work)
		}
		require.NoError(t, env.Down(context.Background()))
		out, err := exec.Command("ip", "netns", "list").CombinedOutput()
		require.NoError(t, err)
		require.NotContains(t, string(out), lcfg.Prefix, "the lab's namespaces are gone")
	})
	require.NoError(t, err)
	t.Logf("lab up with coordinator, agents and Prometheus: %s", time.Since(t0).Round(time.Millisecond))
	c := waitCluster(t, ctx, env, "every agent reports kubelet v"+at+", no drift", func(c api.Cluster) bool {
		return kubelets(c) == "cp-1=v1.33.13 cplb-1=v1.33.13 worker-1=v1.33.13" && drifts(c) == ""
	})
	require.Equal(t, at, c.Status.Version)
	require.Empty(t, c.Status.RecordedVersion)
	require.Equal(t, at, c.Status.Observed.Kubelet.Version)
	require.Equal(t, map[string]int{at: 3}, c.Status.Observed.Kubelet.Nodes)

	t.Run("registration checks the observed version", func(t *testing.T) {
		kc, err := os.ReadFile(env.Lab.Kubeconfig())
		require.NoError(t, err)
		spec := api.ClusterSpec{Name: "lab-stated", Kind: api.ClusterStandalone, Version: to, Pools: c.Spec.Pools, Kubeconfig: string(kc)}
		_, err = env.API().Do(ctx, http.MethodPut, "/v1/clusters/"+spec.Name, spec, nil)
		var p *api.Problem
		require.True(t, errors.As(err, &p), "%v", err)
		t.Logf("registered as %s: %v", to, err)
		require.Equal(t, http.StatusUnprocessableEntity, p.Status)
		require.Equal(t, phases.RuleObservedVersion, p.Rule)
		require.Contains(t, p.Detail, "stated "+to+", but the nodes run "+at)
		for _, n := range []string{"cplb-1", "cp-1", "worker-1"} {
			require.Contains(t, p.Detail, n+": "+at)
		}
		_, err = env.API().Do(ctx, http.MethodGet, "/v1/clusters/"+spec.Name, nil, nil)
		require.True(t, api.IsProblem(err, api.ProblemNotFound), "a refusal stores nothing: %v", err)

		spec.Adopt = true
		var got api.Cluster
		_, err = env.API().Do(ctx, http.MethodPut, "/v1/clusters/"+spec.Name, spec, &got)
		require.NoError(t, err)
		require.Equal(t, at, got.Spec.Version, "adopted")
		require.Equal(t, at, got.Status.Version)
		require.Empty(t, got.Status.RecordedVersion)
		// The hosts are the lab cluster's: the second registration goes.
		_, err = env.API().Do(ctx, http.MethodDelete, "/v1/clusters/"+spec.Name, nil, nil)
		require.NoError(t, err)
	})
	if t.Failed() {
		return
	}

	t.Run("a kubelet replaced by hand is drift", func(t *testing.T) {
		waitQuery(t, ctx, env, `molt_node_version_drift{cluster="lab",node="worker-1"} == 0`, "the metric scraped before")
		worker, err := env.Lab.Host("worker-1")
		require.NoError(t, err)
		replaced := time.Now()
		require.NoError(t, worker.CopyFile(filepath.Join(cachedir.K8sBin(builds, to), "kubelet"), lab.KubeletBinary, 0o755))
		out, err := env.Lab.Exec(ctx, "worker-1", "systemctl", "restart", "kubelet.service")
		require.NoError(t, err, "%s", out)
		const want = "kubelet " + to + ", recorded " + at
		var shown time.Duration
		c := waitClusterWithin(t, ctx, env, time.Minute, "worker-1 drifted", func(c api.Cluster) bool {
			shown = time.Since(replaced)
			return drifts(c) == "worker-1="+want
		})
		t.Logf("MEASURED: drift shown %s after the kubelet was replaced", shown.Round(time.Millisecond))
		require.Less(t, shown, time.Minute)
		require.Equal(t, "cp-1=v1.33.13 cplb-1=v1.33.13 worker-1=v"+to, kubelets(c))
		require.Equal(t, at, c.Status.Version, "the lowest observed")
		require.Equal(t, map[string]int{at: 2, to: 1}, c.Status.Observed.Kubelet.Nodes)

		waitQuery(t, ctx, env, `molt_node_version_drift{cluster="lab",node="worker-1"} == 1`, "molt_node_version_drift")
		t.Logf("MEASURED: molt_node_version_drift 1 in Prometheus %s after the replacement", time.Since(replaced).Round(time.Millisecond))
		alert := waitQuery(t, ctx, env, `ALERTS{alertname="MoltNodeVersionDrift",alertstate="firing"}`, "MoltNodeVersionDrift fires")
		t.Logf("MEASURED: MoltNodeVersionDrift firing %s after the replacement (for: 5 s here, 2m shipped): %v", time.Since(replaced).Round(time.Millisecond), alert)
		require.Len(t, alert, 1, "worker-1 only")
		for labels := range alert {
			require.Contains(t, labels, "node=worker-1")
			require.Contains(t, labels, "cluster=lab")
		}

		// The Node says the same: the new kubelet runs against the 1.33
		// API server (newer by one minor: outside the skew policy, which
		// is what drift is there to show).
		require.Eventually(t, func() bool {
			nodes, err := env.Lab.Nodes(ctx)
			if err != nil {
				return false
			}
			for _, n := range nodes {
				if n.Name == "worker-1" {
					return n.KubeletVersion == "v"+to
				}
			}
			return false
		}, 2*time.Minute, 250*time.Millisecond, "Node worker-1 reports kubelet v%s", to)
		t.Logf("MEASURED: Node worker-1 reports kubelet v%s %s after the replacement", to, time.Since(replaced).Round(time.Millisecond))

		// The channel asks for 1.34.4 in an open window: drift, naming
		// worker-1, is the only thing that holds it back.
		require.NoError(t, env.SetWindow(ctx, true))
		_, err = env.API().Do(ctx, http.MethodPut, "/v1/channels/regular", api.ChannelUpdate{AutoUpgradeTarget: to}, nil)
		require.NoError(t, err)
		st := waitUpgradeStatus(t, ctx, env, "held by drift", func(st api.UpgradeStatus) bool { return st.Next == to })
		t.Logf("upgrade-status: %s — %s; blockedBy %+v", st.State, st.Message, st.BlockedBy)
		require.Equal(t, api.AutoBlockedByRule, st.State)
		require.Equal(t, []api.UpgradeBlock{{Kind: api.BlockDrift, Name: "worker-1",
			Detail: "node worker-1 runs other versions than molt recorded: " + want}}, st.BlockedBy)
		// The scheduler passes on every change (the policy, the channel):
		// held, it starts nothing.
		require.Never(t, func() bool {
			_, err := env.Upgrade(ctx)
			return err == nil
		}, 5*time.Second, 250*time.Millisecond, "an upgrade started")

		// Put back by hand: the drift ends, and with it the only block;
		// the change wakes the scheduler (its periodic pass is a minute
		// away).
		putBack := time.Now()
		require.NoError(t, worker.CopyFile(filepath.Join(cachedir.K8sBin(builds, at), "kubelet"), lab.KubeletBinary, 0o755))
		out, err = env.Lab.Exec(ctx, "worker-1", "systemctl", "restart", "kubelet.service")
		require.NoError(t, err, "%s", out)
		waitClusterWithin(t, ctx, env, time.Minute, "worker-1 agrees again", func(c api.Cluster) bool { return drifts(c) == "" })
		t.Logf("MEASURED: drift gone %s after the kubelet was put back", time.Since(putBack).Round(time.Millisecond))
		var u *api.Upgrade
		require.Eventually(t, func() bool {
			u, err = env.Upgrade(ctx)
			return err == nil
		}, 30*time.Second, 250*time.Millisecond, "the scheduler starts the upgrade on the drift's end, not a minute later at its periodic pass")
		t.Logf("MEASURED: automatic upgrade %s to %s started %s after the kubelet was put back", u.ID, u.To, time.Since(putBack).Round(time.Millisecond))
		require.Equal(t, to, u.To)
		require.True(t, u.Options.Automatic)
	})
	t.Logf("test body: %s", time.Since(began).Round(time.Millisecond))
}

// kubelets is each agent's reported kubelet, "node=version" sorted by node.
func kubelets(c api.Cluster) string {
	var out []string
	for _, a := range c.Status.Agents {
		out = append(out, a.Node+"="+a.Kubelet)
	}
	return sortedJoin(out)
}

// drifts is each drifted node's drift, "node=drift" sorted by node.
func drifts(c api.Cluster) string {
	var out []string
	for _, a := range c.Status.Agents {
		if a.Drift != "" {
			out = append(out, a.Node+"="+a.Drift)
		}
	}
	return sortedJoin(out)
}

func sortedJoin(s []string) string {
	slices.Sort(s)
	return strings.Join(s, " ")
}

func waitCluster(t *testing.T, ctx context.Context, env *e2e.Env, what string, ok func(api.Cluster) bool) api.Cluster {
	t.Helper()
	return waitClusterWithin(t, ctx, env, 2*time.Minute, what, ok)
}

// waitClusterWithin polls the lab cluster until ok accepts it.
func waitClusterWithin(t *testing.T, ctx context.Context, env *e2e.Env, d time.Duration, what string, ok func(api.Cluster) bool) api.Cluster {
	t.Helper()
	var last api.Cluster
	require.Eventually(t, func() bool {
		c, err := env.Cluster(ctx)
		if err != nil {
			return false
		}
		last = c
		return ok(c)
	}, d, 250*time.Millisecond, "%s (agents: %s; drift: %s)", what, fmt.Sprint(kubelets(last)), drifts(last))
	return last
}

// waitQuery polls the lab's Prometheus until expr has a result.
func waitQuery(t *testing.T, ctx context.Context, env *e2e.Env, expr, what string) map[string]string {
	t.Helper()
	var got map[string]string
	var qerr error
	require.Eventually(t, func() bool {
		got, qerr = env.Query(ctx, expr)
		return qerr == nil && len(got) > 0
	}, time.Minute, 500*time.Millisecond, "%s: %s (last: %v, %v)", what, expr, got, qerr)
	return got
}

// waitUpgradeStatus polls the lab cluster's upgrade-status until ok
// accepts it.
func waitUpgradeStatus(t *testing.T, ctx context.Context, env *e2e.Env, what string, ok func(api.UpgradeStatus) bool) api.UpgradeStatus {
	t.Helper()
	var last api.UpgradeStatus
	require.Eventually(t, func() bool {
		st, err := env.UpgradeStatus(ctx)
		if err != nil {
			return false
		}
		last = st
		return ok(st)
	}, time.Minute, 250*time.Millisecond, "%s (last: %+v)", what, last)
	return last
}
