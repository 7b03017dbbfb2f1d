//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/testenv"
)

// The health scenarios (SPEC §16, docs/health.md) ride on the lab run of
// TestUpgradeEndToEnd instead of bringing up a lab of their own.

// brokenVersion is the release whose kubelet exits at start on workers:
// a kubelet stamped as the next patch after patchVersion (cachedir.K8sBuilds),
// published with patchVersion's images.
const brokenVersion = "1.34.5"

// gateHold turns a PromQL health gate of the workers pool red before an
// upgrade and checks, while the upgrade runs, that it holds the pool: the
// first worker waits at its gates step saying which gate and its value,
// no other worker starts while the coordinator looks at the red gate again
// and again (counted in the lab's Prometheus), then it turns the gate green
// and the upgrade goes on. Wait returns what it saw.
type gateHold struct {
	env  *Env
	done chan struct{}
	mu   sync.Mutex
	err  error
	seen string
}

const gateName = "lab-switch"

func startGateHold(t *testing.T, ctx context.Context, env *Env) *gateHold {
	t.Helper()
	env.SetSwitch("gate", 0)
	require.NoError(t, poll(ctx, time.Minute, func() (bool, error) {
		got, err := env.Query(ctx, `molt_lab_switch{name="gate"} == 0`)
		return err == nil && len(got) == 1, nil
	}), "the lab's Prometheus scrapes the switch")
	require.NoError(t, env.SetPoolSettings(ctx, "workers", func(s *api.UpgradeSettings) {
		s.HealthGates = []api.HealthGate{{Name: gateName, Expr: `molt_lab_switch{name="gate"} == 1`, Prometheus: env.PrometheusURL()}}
	}))
	g := &gateHold{env: env, done: make(chan struct{})}
	go g.run(ctx)
	return g
}

func (g *gateHold) run(ctx context.Context) {
	defer close(g.done)
	// Whatever happens, the gate ends green: the upgrade must not wait for
	// the gate deadline because this check failed.
	defer g.env.SetSwitch("gate", 1)
	fail := func(err error) { g.mu.Lock(); g.err = err; g.mu.Unlock() }
	var held *api.Upgrade
	err := poll(ctx, 20*time.Minute, func() (bool, error) {
		u, err := g.env.Upgrade(ctx)
		if err != nil || !u.InProgress {
			return false, nil
		}
		for _, n := range u.Nodes {
			if n.Pool == "workers" && n.RedGate == gateName {
				held = u
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		fail(fmt.Errorf("no worker was held by gate %s: %w", gateName, err))
		return
	}
	// Three more looks at the red gate, as the lab's Prometheus counts
	// them from the coordinator's series; the other worker must not start
	// meanwhile.
	red := func() (int, error) {
		got, err := g.env.Query(ctx, `sum(molt_health_gate_checks_total{gate="`+gateName+`",result="red"})`)
		if err != nil || len(got) == 0 {
			return 0, err
		}
		for _, v := range got {
			n, err := strconv.ParseFloat(v, 64)
			return int(n), err
		}
		return 0, nil
	}
	first, _ := red()
	err = poll(ctx, 2*time.Minute, func() (bool, error) {
		u, err := g.env.Upgrade(ctx)
		if err != nil {
			return false, nil
		}
		started := 0
		for _, n := range u.Nodes {
			if n.Pool == "workers" && n.State != api.StepPending {
				started++
			}
		}
		if started > 1 {
			return false, fmt.Errorf("a second worker started while gate %s was red: %s", gateName, nodeStates(u))
		}
		n, _ := red()
		return n >= first+3, nil
	})
	if err != nil {
		fail(err)
		return
	}
	for _, n := range held.Nodes {
		if n.RedGate == gateName {
			g.mu.Lock()
			g.seen = n.Node + ": " + n.Waiting
			g.mu.Unlock()
		}
	}
}

// Wait returns what the hold saw: the held node and its waiting reason.
func (g *gateHold) Wait(t *testing.T) string {
	t.Helper()
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	require.NoError(t, g.err)
	return g.seen
}

// testBrokenKubelet: a release whose kubelet exits at start on worker
// hosts. The control plane and load balancers take it (Ready at the new
// version); the first worker's kubelet upgrade fails (the agent restores
// the previous binary), the workers' failure budget (1) fails the pool,
// rollback auto takes the worker back to the old version Ready, the
// upgrade ends failed with the reason, MoltUpgradeFailed fires in the
// lab's Prometheus, and the other worker was never touched.
func testBrokenKubelet(t *testing.T, ctx context.Context, env *Env) {
	testenv.RequireFile(t, StampedKubelet(env.cfg.Lab.BuildCache, brokenVersion),
		"the stamped kubelet ("+cachedir.K8sBuildOf(brokenVersion).Command()+")")
	_, err := env.PublishBrokenRelease(ctx, patchVersion, brokenVersion)
	require.NoError(t, err)
	require.NoError(t, env.SetPoolSettings(ctx, "workers", func(s *api.UpgradeSettings) {
		s.Rollback, s.HealthGates = "auto", nil
	}))
	before := workerKubelets(t, ctx, env)
	// One worker pool at a time, the workers first (the MIG pool follows
	// them in the spec): the failed workers pool ends the upgrade before
	// the MIG pool starts, which stays at the patch.
	env.cfg.ConcurrentWorkerPools = 1
	var migNodes []string
	if m := env.MIG(); m != nil {
		migNodes, err = env.PoolNodes(ctx, m.Name)
		require.NoError(t, err)
	}

	t0 := time.Now()
	started, err := env.StartUpgrade(ctx, brokenVersion)
	require.NoError(t, err)
	u, err := env.WatchUntil(ctx, started.ID, "the upgrade fails", func(u *api.Upgrade) bool { return u.State == api.UpgradeFailed })
	require.NoError(t, err)
	t.Logf("MEASURED broken release %s: failed and rolled back in %s\n%s", brokenVersion, time.Since(t0).Round(time.Second), Summary(u))

	require.True(t, strings.HasPrefix(u.Reason, "pool workers: 1 of 2 nodes failed, its failure budget is 1 (maxFailedNodes): worker-1 (operation:UpgradeBinary:kubelet:"), u.Reason)
	require.True(t, strings.HasSuffix(u.Reason, "; rolled back: workers"), u.Reason)
	for _, p := range []string{"cplb", "cp", "lb"} {
		s, _ := u.Step(api.PoolStepID(p))
		require.Equal(t, api.StepDone, s.State, "pool %s took the release", p)
	}
	w1, _ := u.Node("worker-1")
	require.True(t, w1.Rollback)
	require.Equal(t, api.StepDone, w1.State)
	require.Equal(t, patchVersion, w1.Version)
	if m := env.MIG(); m != nil {
		s, _ := u.Step(api.PoolStepID(m.Name))
		require.Equal(t, api.StepPending, s.State, "the MIG pool after the failed workers pool did not start")
	}
	w2, _ := u.Node("worker-2")
	require.Equal(t, api.StepPending, w2.State, "worker-2 was not touched")
	require.Zero(t, w2.Attempt)

	// What the cluster says: the control plane runs the new kubelet, the
	// workers the old one, Ready and schedulable.
	nodes, err := env.Lab.Nodes(ctx)
	require.NoError(t, err)
	for _, n := range nodes {
		want := "v" + brokenVersion
		if strings.HasPrefix(n.Name, "worker-") || slices.Contains(migNodes, n.Name) {
			want = "v" + patchVersion
		}
		require.True(t, n.Ready, "%s Ready", n.Name)
		require.False(t, n.Unschedulable, "%s uncordoned", n.Name)
		require.Equal(t, want, n.KubeletVersion, n.Name)
	}
	require.Equal(t, before, workerKubelets(t, ctx, env), "the workers run the kubelet binary they ran before")

	// The alert fires in the lab's Prometheus, on the coordinator's own
	// series (its rules' for: cut to AlertFor).
	var alerts map[string]string
	require.NoError(t, poll(ctx, 2*time.Minute, func() (bool, error) {
		alerts, err = env.Query(ctx, `ALERTS{alertname="MoltUpgradeFailed",alertstate="firing"}`)
		return err == nil && len(alerts) > 0, nil
	}), "MoltUpgradeFailed fires in the lab's Prometheus")
	t.Logf("lab Prometheus: %v", alerts)
	for labels := range alerts {
		require.Contains(t, labels, "cluster="+ClusterName)
	}
	rolled, err := env.Query(ctx, `molt_node_rollbacks_total{pool="workers",result="succeeded"}`)
	require.NoError(t, err)
	require.NotEmpty(t, rolled)
}

// workerKubelets is the sha256 of each worker's installed kubelet.
func workerKubelets(t *testing.T, ctx context.Context, env *Env) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, h := range []string{"worker-1", "worker-2"} {
		b, err := env.Lab.Exec(ctx, h, "sha256sum", "/usr/bin/kubelet")
		require.NoError(t, err)
		out[h] = strings.Fields(string(b))[0]
	}
	return out
}

// nodeStates is "node=state" for every node of u, for messages.
func nodeStates(u *api.Upgrade) string {
	var parts []string
	for _, n := range u.Nodes {
		parts = append(parts, fmt.Sprintf("%s=%s@%s", n.Node, n.State, n.Version))
	}
	return strings.Join(parts, " ")
}
