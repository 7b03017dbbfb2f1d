package coordinator_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/promtest"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/moltproject/molt/phases"
)

// brokenKubeletOn fails the kubelet upgrade of the named nodes, as an
// agent whose new kubelet exits at start reports it (the agent restored
// the previous binary).
func brokenKubeletOn(nodes ...string) func(string, api.Operation) string {
	return func(node string, op api.Operation) string {
		if slices.Contains(nodes, node) && op.UpgradeBinary != nil && op.UpgradeBinary.Component == api.ComponentKubelet {
			return "component not healthy: kubelet after 2m0s: exited at start; previous binary restored"
		}
		return ""
	}
}

func startFailingAgents(ctx context.Context, tc *testCluster, cluster string, nodes []string, fail func(string, api.Operation) string) map[string]*simAgent {
	agents := startAgentsWith(ctx, tc, cluster, nodes, false, nil)
	for _, a := range agents {
		a.mu.Lock()
		a.fail = fail
		a.mu.Unlock()
	}
	return agents
}

func waitLabUpgrade(t *testing.T, cl *client.Client, what string, cond func(*phases.Upgrade) bool) *phases.Upgrade {
	t.Helper()
	var u *phases.Upgrade
	eventually(t, what, func() bool {
		got, err := getUpgrade(context.Background(), cl, "lab")
		if err == nil {
			u = got
		}
		return err == nil && cond(got)
	})
	return u
}

// TestFailureBudgetRollsBackAndAlerts is SPEC §16 through the coordinator:
// the first worker's kubelet fails, the workers' budget (default 1) fails
// the pool, rollback auto takes the worker back — cordon, drain, the
// agent's Rollback of the kubelet then the containerd operation, Ready at
// the old version, uncordon — the upgrade ends failed with the reason,
// the other worker is never touched, metrics and the audit trail show it,
// and MoltUpgradeFailed fires on the coordinator's own series.
func TestFailureBudgetRollsBackAndAlerts(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops, func(c *coordinator.Config) { c.GateInterval = 20 * time.Millisecond })
	m := tc.members[0]
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	spec := clusterSpec("lab", "1.33.6")
	spec.Pools[3].Settings.Rollback = "auto"
	put(t, cl, "/v1/clusters/lab", spec)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agents := startFailingAgents(ctx, tc, "lab", nodeNames(spec), brokenKubeletOn("worker-1", "worker-2"))
	waitAgents(t, tc, "lab", 7)
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)

	u := waitLabUpgrade(t, cl, "upgrade failed", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeFailed })
	require.True(t, strings.HasPrefix(u.Reason, "pool workers: 1 of 2 nodes failed, its failure budget is 1 (maxFailedNodes): worker-1 (operation:UpgradeBinary:kubelet: component not healthy"), u.Reason)
	require.True(t, strings.HasSuffix(u.Reason, "; rolled back: workers"), u.Reason)
	st, _ := u.Step("pool/workers")
	require.Equal(t, phases.StateRolledBack, st.State)
	health, _ := u.Step(phases.StepIDHealth)
	require.Equal(t, phases.StatePending, health.State)
	w1, _ := u.Node("worker-1")
	require.True(t, w1.Rollback)
	require.Equal(t, phases.StateDone, w1.State)
	require.Equal(t, "1.33.6", w1.Version.String())
	w2, _ := u.Node("worker-2")
	require.Equal(t, phases.StatePending, w2.State, "worker-2 never started")
	require.Empty(t, agents["worker-2"].executions(), "no operation ran on worker-2")
	for _, c := range ops.Calls() {
		require.NotContains(t, c, "worker-2", "worker-2 was touched: %s", c)
	}

	// The rollback undid the kubelet operation (which failed; the agent
	// had restored the binary) and then the containerd one.
	kubeletOp, ok := w1.AppliedOpOf(phases.ComponentKubelet)
	require.True(t, ok)
	containerdOp, ok := w1.AppliedOpOf(phases.ComponentContainerd)
	require.True(t, ok)
	var undone []string
	for id := range agents["worker-1"].executions() {
		if strings.Contains(id, "/rollback/") {
			undone = append(undone, id)
		}
	}
	slices.Sort(undone)
	require.Equal(t, []string{u.RollbackOperationID("worker-1", 2, 1), u.RollbackOperationID("worker-1", 3, 1)}, undone)
	require.NotEqual(t, kubeletOp, containerdOp)
	var w1Calls []string
	for _, c := range ops.Calls() {
		if strings.HasSuffix(c, "worker-1") || strings.Contains(c, "worker-1 ") {
			w1Calls = append(w1Calls, c)
		}
	}
	require.Equal(t, []string{"cordon worker-1", "drain worker-1", "cordon worker-1", "drain worker-1", "ready worker-1 v1.33.6", "uncordon worker-1"}, w1Calls)

	// Metrics and the audit trail say so.
	got := scrape(t, m, "molt_")
	require.Contains(t, got, `molt_cluster_upgrade_phase{cluster="lab",phase="failed"} 1`)
	require.Contains(t, got, `molt_pool_upgrade_phase{cluster="lab",phase="rolled_back",pool="workers"} 1`)
	require.Contains(t, got, `molt_upgrade_step_state{cluster="lab",state="rolled_back",step="pool/workers"} 1`)
	require.Contains(t, got, `molt_node_rollbacks_total{cluster="lab",pool="workers",result="succeeded"} 1`)
	require.Contains(t, got, `molt_node_upgrades_total{cluster="lab",pool="workers",result="failed"} 1`)
	require.Contains(t, got, `molt_pool_max_failed_nodes{cluster="lab",pool="workers"} 1`)
	var audit []string
	for _, e := range m.c.AuditLog(api.AuditQuery{Cluster: "lab", Limit: api.MaxAuditLimit}).Entries {
		audit = append(audit, e.Action+" "+strings.SplitN(e.Detail, ":", 2)[0])
	}
	require.Subset(t, audit, []string{"pool-failed workers", "pool-rollback workers", "upgrade-failed lab-1.34.4-1"})
	promtoolUpgradeFailedFires(t, got, "lab")

	// The cluster is mixed: only the same version may start next, and a
	// second rollback of the pool is refused with its rule.
	code, prob, _ := raw(t, m, "POST", "/v1/clusters/lab/pools/workers/upgrade:rollback", "application/json", []byte(`{}`))
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, "already-rolling-back", prob.Rule)
	code, prob, _ = raw(t, m, "POST", "/v1/clusters/lab/pools/cp/upgrade:rollback", "application/json", []byte(`{}`))
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, "rollback-skew", prob.Rule, "lb-1's kubelet runs 1.34.4")
	put(t, cl, "/v1/releases/1.34.5", release("1.34.5"))
	code, prob, _ = raw(t, m, "POST", "/v1/clusters/lab/upgrade", "application/json", []byte(`{"version":"1.34.5"}`))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Equal(t, "mixed-cluster", prob.Rule)
	code, _, body := raw(t, m, "POST", "/v1/clusters/lab/upgrade", "application/json", []byte(`{"version":"1.34.4","dryRun":true}`))
	require.Equal(t, http.StatusOK, code, "%s", body)
}

// TestManualRollbackOfFailedPool: with the default policy the failed pool
// stays where it failed; an operator's rollback of it, then of the
// load-balancer pool, then of the control plane, take the cluster back to
// 1.33.6 in the order the version rules allow, and the upgrade ends failed
// again.
func TestManualRollbackOfFailedPool(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops, func(c *coordinator.Config) { c.GateInterval = 20 * time.Millisecond })
	m := tc.members[0]
	cl := m.client()
	spec := registerLab(t, cl)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startFailingAgents(ctx, tc, "lab", nodeNames(spec), brokenKubeletOn("worker-1"))
	waitAgents(t, tc, "lab", 7)
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	u := waitLabUpgrade(t, cl, "upgrade failed", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeFailed })
	st, _ := u.Step("pool/workers")
	require.Equal(t, phases.StateFailed, st.State)
	w1, _ := u.Node("worker-1")
	require.Equal(t, phases.StateFailed, w1.State)

	for _, pool := range []string{"cp", "workers", "lb", "cplb", "cp"} {
		code, prob, body := raw(t, m, "POST", "/v1/clusters/lab/pools/"+pool+"/upgrade:rollback", "application/json", []byte(`{}`))
		if pool == "cp" && prob != nil && prob.Rule == "rollback-skew" {
			continue // the first try: the other pools run 1.34.4
		}
		require.Equal(t, http.StatusOK, code, "%s: %s", pool, body)
		u = waitLabUpgrade(t, cl, "pool "+pool+" rolled back", func(u *phases.Upgrade) bool {
			s, _ := u.Step("pool/" + pool)
			return s.State == phases.StateRolledBack && u.State == phases.UpgradeFailed
		})
	}
	for _, n := range u.Nodes {
		if n.Node != "worker-2" {
			require.True(t, n.Rollback, n.Node)
		}
		require.Equal(t, "1.33.6", n.Version.String(), n.Node)
	}
	require.True(t, ops.called("ready cp-1 v1.33.6"))
}

// TestHealthStepGivesUp: a final health step that keeps failing fails the
// upgrade once the health timeout passed, with its last message.
func TestHealthStepGivesUp(t *testing.T) {
	ops := newFakeOps()
	ops.health = 1 << 30
	cl := upgradeLab(t, newTestCluster(t, 1, ops, func(c *coordinator.Config) { c.HealthTimeout = time.Second }))
	u := waitLabUpgrade(t, cl, "upgrade failed", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeFailed })
	require.Equal(t, "step health: did not pass within 1s (health timeout); last attempt: kube-apiserver /readyz: etcd not ready", u.Reason)
	require.Equal(t, time.Second, u.Options.HealthTimeout)
}

// TestPromQLGateHoldsPool: a pool's PromQL gate, asked of a real
// Prometheus that scrapes a gauge the test sets, holds the pool while it
// is red — the first worker waits at its gates step saying which gate and
// its value, the second does not start — and lets it go on once green.
func TestPromQLGateHoldsPool(t *testing.T) {
	reg := prometheus.NewRegistry()
	errors := prometheus.NewGauge(prometheus.GaugeOpts{Name: "probe_error_ratio"})
	reg.MustRegister(errors)
	errors.Set(0.5)
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer target.Close()
	prom := promtest.Start(t, 100*time.Millisecond, target.Listener.Addr().String())

	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops, func(c *coordinator.Config) { c.GateInterval = 50 * time.Millisecond })
	m := tc.members[0]
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	spec := clusterSpec("lab", "1.33.6")
	spec.Pools[3].Settings.HealthGates = []api.HealthGate{{Name: "errors", Expr: "max(probe_error_ratio) == 0", For: "1s", Prometheus: prom.URL}}
	put(t, cl, "/v1/clusters/lab", spec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runAgents(ctx, tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)

	u := waitLabUpgrade(t, cl, "worker-1 held by the red gate", func(u *phases.Upgrade) bool {
		n, _ := u.Node("worker-1")
		return n.RedGate == "errors"
	})
	w1, _ := u.Node("worker-1")
	require.Equal(t, "gate errors red: no result", w1.Waiting)
	// Several looks later the gate is still red and worker-2 still waits.
	eventually(t, "the gate looked at 5 times", func() bool {
		for _, l := range scrape(t, m, "molt_health_gate_checks_total") {
			var n int
			if _, err := fmt.Sscanf(l, `molt_health_gate_checks_total{cluster="lab",gate="errors",pool="workers",result="red"} %d`, &n); err == nil && n >= 5 {
				return true
			}
		}
		return false
	})
	require.Contains(t, scrape(t, m, "molt_pool_health_gate_red"), `molt_pool_health_gate_red{cluster="lab",gate="errors",pool="workers"} 1`)
	u, err = getUpgrade(ctx, cl, "lab")
	require.NoError(t, err)
	w2, _ := u.Node("worker-2")
	require.Equal(t, phases.StatePending, w2.State, "a red gate holds the pool")
	require.False(t, ops.called("cordon worker-2"))

	errors.Set(0)
	waitLabUpgrade(t, cl, "upgrade done", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeDone })
}

// promtoolUpgradeFailedFires runs the shipped alert rules on series taken
// from a coordinator's /metrics (lines "name{labels} value", held constant
// for half an hour) and checks that MoltUpgradeFailed fires for cluster
// after its for: (5m), and not before.
func promtoolUpgradeFailedFires(t *testing.T, lines []string, cluster string) {
	t.Helper()
	promtool := testenv.RequireBinary(t, "promtool")
	rules, err := filepath.Abs("../deploy/prometheus/molt-alerts.yml")
	require.NoError(t, err)
	var b strings.Builder
	fmt.Fprintf(&b, "rule_files: [%q]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n", rules)
	for _, l := range lines {
		if i := strings.LastIndexByte(l, ' '); i > 0 && !strings.HasPrefix(l, "#") {
			fmt.Fprintf(&b, "      - series: %q\n        values: '%sx30'\n", l[:i], l[i+1:])
		}
	}
	fmt.Fprintf(&b, `    alert_rule_test:
      - eval_time: 4m
        alertname: MoltUpgradeFailed
        exp_alerts: []
      - eval_time: 20m
        alertname: MoltUpgradeFailed
        exp_alerts:
          - exp_labels: {severity: critical, cluster: %[1]s, phase: failed}
            exp_annotations:
              summary: "Upgrade of cluster %[1]s failed"
              description: "The upgrade of cluster %[1]s is in phase failed and will not go on by itself."
              runbook_url: "https://github.com/moltproject/molt/blob/main/docs/observability.md#moltupgradefailed"
`, cluster)
	path := filepath.Join(t.TempDir(), "real-series.test.yml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestGateDeadlineFailsNode: a built-in gate (the node not Ready at its
// version after its uncordon) still red at the gate deadline fails the
// node, and the default budget fails the pool and the upgrade.
func TestGateDeadlineFailsNode(t *testing.T) {
	ops := newFakeOps()
	ops.setUnready("worker-1", "node worker-1 is not Ready")
	tc := newTestCluster(t, 1, ops, func(c *coordinator.Config) { c.GateTimeout, c.GateInterval = time.Second, 20*time.Millisecond })
	cl := tc.members[0].client()
	spec := registerLab(t, cl)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runAgents(ctx, tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	u := waitLabUpgrade(t, cl, "upgrade failed", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeFailed })
	w1, _ := u.Node("worker-1")
	require.Equal(t, phases.StateFailed, w1.State)
	require.Equal(t, "gates: gate node-ready red: node worker-1 is not Ready, still after the 1s gate deadline", w1.Error)
	require.Contains(t, u.Reason, "pool workers: 1 of 2 nodes failed")
	w2, _ := u.Node("worker-2")
	require.Equal(t, phases.StatePending, w2.State)
}
