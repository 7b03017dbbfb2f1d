package coordinator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
)

// skewCluster is a cluster of a control-plane LB, three control-plane
// nodes and two workers, with a minor upgrade recorded; set gives each
// node the version its kubelet runs.
func skewCluster(t *testing.T, state phases.UpgradeState, set map[string]string) *statemachine.ClusterRecord {
	t.Helper()
	from, to := phases.MustParseVersion("1.33.13"), phases.MustParseVersion("1.34.3")
	nodes := func(names ...string) []phases.Node {
		var out []phases.Node
		for _, n := range names {
			out = append(out, phases.Node{Name: n})
		}
		return out
	}
	spec := phases.ClusterSpec{Name: "lab", Kind: phases.KindStandalone, Version: from, Pools: []phases.Pool{
		{Name: "cplb", Role: phases.RoleControlPlaneLB, Nodes: nodes("cplb-1")},
		{Name: "cp", Role: phases.RoleControlPlane, Nodes: nodes("cp-1", "cp-2", "cp-3")},
		{Name: "workers", Role: phases.RoleWorker, Nodes: nodes("worker-1", "worker-2")},
	}}
	u := phases.NewUpgrade("lab-1.34.3-1", &spec, to, phases.Options{}, time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC))
	u.State = state
	for i := range u.Nodes {
		if v, ok := set[u.Nodes[i].Node]; ok {
			u.Nodes[i].Version = phases.MustParseVersion(v)
		}
	}
	spec.Version = to // the desired version moves when the upgrade starts
	return &statemachine.ClusterRecord{Spec: spec, StatusVersion: from, Upgrade: u}
}

// TestSkewAfterAFailedMinorIsNoViolation: a minor that failed in the
// workers (seed 201 of the chaos runs: a wrong checksum) leaves status at
// the old version and the control plane at the new. The metric said 1
// there, measuring nodes against status rather than the control plane.
func TestSkewAfterAFailedMinorIsNoViolation(t *testing.T) {
	upgraded := map[string]string{"cplb-1": "1.34.3", "cp-1": "1.34.3", "cp-2": "1.34.3", "cp-3": "1.34.3"}
	for _, st := range []phases.UpgradeState{phases.UpgradeFailed, phases.UpgradeCancelled, phases.UpgradeRunning} {
		require.False(t, skewViolated(skewCluster(t, st, upgraded), nil), "%s: control plane and its LB at the new version, workers at the old", st)
	}
	// Mid control plane: the LB ahead of it is no violation, a worker is.
	mid := map[string]string{"cplb-1": "1.34.3", "cp-1": "1.34.3"}
	require.False(t, skewViolated(skewCluster(t, phases.UpgradeRunning, mid), nil))
	mid["worker-1"] = "1.34.3"
	require.True(t, skewViolated(skewCluster(t, phases.UpgradeRunning, mid), nil), "a worker newer than the oldest kube-apiserver")
	// A third version anywhere.
	three := map[string]string{"cplb-1": "1.34.3", "cp-1": "1.34.3", "cp-2": "1.34.3", "cp-3": "1.34.3", "worker-2": "1.33.12"}
	require.True(t, skewViolated(skewCluster(t, phases.UpgradeFailed, three), nil), "three versions")
}
