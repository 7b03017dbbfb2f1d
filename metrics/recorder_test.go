package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestRecorderNodeUpgraded(t *testing.T) {
	r := NewRecorder(prometheus.NewPedanticRegistry())
	r.NodeUpgraded("c", "wk", 8*time.Minute, true)
	r.NodeUpgraded("c", "wk", 25*time.Minute, true)

	// The failed series exists at 0 before the first failure, so that
	// increase() sees the failure.
	require.Equal(t, 2.0, testutil.ToFloat64(r.nodeUpgrades.WithLabelValues("c", "wk", ResultSucceeded)))
	require.Equal(t, 0.0, testutil.ToFloat64(r.nodeUpgrades.WithLabelValues("c", "wk", ResultFailed)))
	r.NodeUpgraded("c", "wk", time.Hour, false)
	require.Equal(t, 1.0, testutil.ToFloat64(r.nodeUpgrades.WithLabelValues("c", "wk", ResultFailed)))

	const want = `
# HELP molt_node_upgrade_duration_seconds Time to upgrade one node, cordon to uncordon.
# TYPE molt_node_upgrade_duration_seconds histogram
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="30"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="60"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="120"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="300"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="600"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="900"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="1200"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="1500"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="1800"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="2700"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="3600"} 1
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="5400"} 1
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="7200"} 1
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="failed",le="+Inf"} 1
molt_node_upgrade_duration_seconds_sum{cluster="c",pool="wk",result="failed"} 3600
molt_node_upgrade_duration_seconds_count{cluster="c",pool="wk",result="failed"} 1
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="30"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="60"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="120"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="300"} 0
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="600"} 1
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="900"} 1
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="1200"} 1
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="1500"} 2
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="1800"} 2
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="2700"} 2
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="3600"} 2
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="5400"} 2
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="7200"} 2
molt_node_upgrade_duration_seconds_bucket{cluster="c",pool="wk",result="succeeded",le="+Inf"} 2
molt_node_upgrade_duration_seconds_sum{cluster="c",pool="wk",result="succeeded"} 1980
molt_node_upgrade_duration_seconds_count{cluster="c",pool="wk",result="succeeded"} 2
`
	require.NoError(t, testutil.CollectAndCompare(r.nodeUpgradeDuration, strings.NewReader(want)))
}

func TestRecorderDrained(t *testing.T) {
	tests := []struct {
		name         string
		timedOut     bool
		leftBehind   map[string]int
		wantTimeouts float64
		wantLeft     map[string]float64
	}{
		{"clean drain", false, nil, 0, map[string]float64{}},
		{"timed out", true, map[string]int{"pdb": 2, "terminating": 1, "zero": 0}, 1,
			map[string]float64{"pdb": 2, "terminating": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			r := NewRecorder(reg)
			r.Drained("c", "wk", 21*time.Minute, tt.timedOut, tt.leftBehind)
			require.Equal(t, tt.wantTimeouts, testutil.ToFloat64(r.drainTimeouts.WithLabelValues("c", "wk")))
			require.Equal(t, len(tt.wantLeft), testutil.CollectAndCount(r.podsLeftBehind))
			for reason, v := range tt.wantLeft {
				require.Equal(t, v, testutil.ToFloat64(r.podsLeftBehind.WithLabelValues("c", "wk", reason)))
			}
			require.Equal(t, 1, testutil.CollectAndCount(r.drainDuration))
		})
	}
}

// TestRecorderCardinalityIndependentOfPods: a drain that leaves a thousand
// pods behind adds one series per reason, not per pod.
func TestRecorderCardinalityIndependentOfPods(t *testing.T) {
	r := NewRecorder(nil)
	for range 50 {
		r.Drained("c", "wk", time.Minute, true, map[string]int{"pdb": 600, "terminating": 400})
	}
	require.Equal(t, 2, testutil.CollectAndCount(r.podsLeftBehind))
	require.Equal(t, 50000.0, testutil.ToFloat64(r.podsLeftBehind.WithLabelValues("c", "wk", "pdb"))+
		testutil.ToFloat64(r.podsLeftBehind.WithLabelValues("c", "wk", "terminating")))
}

func TestRecorderRaftAndPreflightAndAgentOps(t *testing.T) {
	r := NewRecorder(nil)
	r.RaftCommit(3 * time.Millisecond)
	r.LeaderChange()
	r.LeaderChange()
	r.PreflightCheck("c", "disk_space", "fail")
	r.PreflightCheck("c", "disk_space", "fail")
	r.PreflightCheck("c", "skew", "pass")
	r.AgentOperation("UpgradeBinary", ResultSucceeded)
	r.HandshakeRefused("raft", "timeout")

	require.Equal(t, 2.0, testutil.ToFloat64(r.leaderChanges))
	require.Equal(t, 1.0, testutil.ToFloat64(r.handshakesRefused.WithLabelValues("raft", "timeout")))
	require.Equal(t, 0.0, testutil.ToFloat64(r.handshakesRefused.WithLabelValues("api", "limit")), "every series exists from the start")
	require.Equal(t, 1, testutil.CollectAndCount(r.raftCommit))
	require.Equal(t, 2.0, testutil.ToFloat64(r.preflightChecks.WithLabelValues("c", "disk_space", "fail")))
	require.Equal(t, 1.0, testutil.ToFloat64(r.preflightChecks.WithLabelValues("c", "skew", "pass")))
	require.Equal(t, 1.0, testutil.ToFloat64(r.agentOperations.WithLabelValues("UpgradeBinary", ResultSucceeded)))
}

func TestAgentMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewAgentMetrics(reg)
	m.Operation("UpgradeStaticPods", ResultSucceeded, 40*time.Second)
	m.Operation("UpgradeStaticPods", ResultFailed, 5*time.Minute)
	m.HeartbeatSucceeded(t0)
	m.HeartbeatFailed()

	require.Equal(t, 1.0, testutil.ToFloat64(m.operations.WithLabelValues("UpgradeStaticPods", ResultFailed)))
	require.Equal(t, 1, testutil.CollectAndCount(m.operationDuration), "one histogram per kind, not per result")
	require.Equal(t, float64(t0.Unix()), testutil.ToFloat64(m.heartbeatSuccess))
	require.Equal(t, 1.0, testutil.ToFloat64(m.heartbeatFailures))
}

func TestRegisteringTwicePanics(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewRecorder(reg)
	require.Panics(t, func() { NewRecorder(reg) })
	NewAgentMetrics(reg) // distinct names: the agent's metrics fit beside the coordinator's
}

// exercised returns a registry holding every metric of the package, each
// with at least one series, as a running coordinator and agent would.
func exercised(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	r := NewRecorder(reg)
	r.NodeUpgraded("c", "wk", time.Minute, true)
	r.Drained("c", "wk", time.Minute, true, map[string]int{"pdb": 1})
	r.PreflightCheck("c", "skew", "pass")
	r.RaftCommit(time.Millisecond)
	r.LeaderChange()
	r.AgentOperation("UpgradeBinary", ResultSucceeded)
	r.NodeRolledBack("c", "wk", true)
	r.Gate("c", "wk", "errors", false)
	a := NewAgentMetrics(reg)
	a.Operation("UpgradeBinary", ResultSucceeded, time.Second)
	a.HeartbeatSucceeded(t0)
	a.HeartbeatFailed()
	a.ArtifactBytes("network", 1)
	reg.MustRegister(NewCoordinatorCollector(&fakeSource{raft: leaderRaft, now: t0,
		clusters: []ClusterView{{Name: "c", Phase: "running",
			Steps: []StepView{{Name: "s", State: "running", StartedAt: t0, Expected: time.Hour}},
			Pools: []PoolView{{Name: "p", NodesTotal: 1, Cloud: true, Waiting: map[string]int{"stockout": 1},
				Gates: []string{"node-ready", "errors"}, Red: map[string]int{"errors": 1}, MaxFailedNodes: 1}},
			NodesPerVersion: map[string]int{"1.31.0": 1}, EndOfSupport: t0,
			AutoUpgradeState: "backoff", AutoUpgradeFailures: 2, AutoUpgradeNextAttempt: t0.Add(time.Hour),
			EndOfSupportUpgrade: t0}},
		agents: []AgentView{{Cluster: "c", Node: "n", LastSeen: t0}},
		seqs:   []SequenceView{{Sequence: "fleet", Version: "1.34.4", Reached: 1, SoakEnds: t0}}}))
	return reg
}

// TestCatalogMatchesExport: Catalog, which rules, dashboard and docs are
// checked against, lists exactly what the code exports, with the same types
// and label names.
func TestCatalogMatchesExport(t *testing.T) {
	mfs, err := exercised(t).Gather()
	require.NoError(t, err)
	type shape struct {
		Type Type
		Help string
	}
	got, want := map[string]shape{}, map[string]shape{}
	gotLabels := map[string][]string{}
	for _, mf := range mfs {
		got[mf.GetName()] = shape{Type(strings.ToLower(mf.GetType().String())), mf.GetHelp()}
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			gotLabels[mf.GetName()] = append(gotLabels[mf.GetName()], lp.GetName())
		}
	}
	for _, m := range Catalog() {
		want[m.Name] = shape{m.Type, m.Help}
		require.ElementsMatch(t, m.Labels, gotLabels[m.Name], m.Name)
	}
	require.Equal(t, want, got)
}

func TestRecorderAndAgentLint(t *testing.T) {
	problems, err := testutil.GatherAndLint(exercised(t))
	require.NoError(t, err)
	require.Empty(t, problems)
}
