package e2e

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

func TestSummaryListsStepsInTheOrderTheyRan(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	u := &api.Upgrade{
		ID: "lab-1.34.3-1", From: "1.33.13", To: "1.34.3",
		State: api.UpgradeDone, CreatedAt: t0, FinishedAt: at(100),
		// Listed out of order on purpose; the pending one never ran.
		Steps: []api.Step{
			{ID: "pool/workers", StartedAt: at(60), FinishedAt: at(90)},
			{ID: "pool/cplb", StartedAt: at(0), FinishedAt: at(10)},
			{ID: "pool/cp", StartedAt: at(10), FinishedAt: at(50)},
			{ID: "addons", StartedAt: at(50), FinishedAt: at(50)},
			{ID: "pool/lb", StartedAt: at(50), FinishedAt: at(60)},
			{ID: "never", State: api.StepPending},
		},
		Nodes: []api.NodeTask{
			{Node: "worker-1", Pool: "workers", StartedAt: at(60), FinishedAt: at(90), Version: "1.34.3",
				LeftBehind: []api.LeftPod{{Namespace: "molt-demo", Name: "echo-1", Reason: "pdb"}}},
		},
	}
	var ids []string
	for _, s := range StepsInOrder(u) {
		ids = append(ids, s.ID)
	}
	require.Equal(t, []string{"pool/cplb", "pool/cp", "addons", "pool/lb", "pool/workers"}, ids)

	sum := Summary(u)
	require.Contains(t, sum, "v1.33.13 → v1.34.3, done in 1m40s")
	require.Less(t, strings.Index(sum, "pool/cplb"), strings.Index(sum, "pool/cp "))
	require.Contains(t, sum, "worker-1   workers       30s  v1.34.3")
	require.Contains(t, sum, "molt-demo/echo-1: pdb")
	require.NotContains(t, sum, "never")
}

func TestProgressPrintsChangesOnceAndNeverGoesBack(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	// A control-plane node's bare-metal steps, as the wire lists them.
	op := func(k api.OperationKind, component string) api.NodeStep {
		return api.NodeStep{Kind: api.NodeStepOperation, Op: &api.OpSpec{Kind: k, Component: component}}
	}
	steps := []api.NodeStep{{Kind: api.NodeStepCordon}, {Kind: api.NodeStepDrain}, op(api.OpImportImages, ""), op(api.OpUpgradeStaticPods, ""),
		op(api.OpUpgradeBinary, "containerd"), op(api.OpUpgradeBinary, "kubelet"), {Kind: api.NodeStepWaitReady}, {Kind: api.NodeStepUncordon}}
	mk := func(rev uint64, cursor int) *api.Upgrade {
		return &api.Upgrade{CreatedAt: t0, Revision: rev, State: api.UpgradeRunning, InProgress: true,
			Steps: []api.Step{{ID: "pool/cp", State: api.StepRunning, StartedAt: t0}},
			Pools: []api.PoolTrack{{Name: "cp", NodeSteps: steps, Count: 1}},
			Nodes: []api.NodeTask{{Node: "cp-1", Pool: "cp", State: api.StepRunning, Cursor: cursor, Step: steps[cursor].String(), StepStartedAt: t0.Add(time.Second)}},
		}
	}
	var buf bytes.Buffer
	p := newProgress(&buf)
	p.show(mk(5, 1))
	p.show(mk(5, 1))
	p.show(mk(4, 0)) // a follower a little behind
	out := buf.String()
	require.Equal(t, 1, strings.Count(out, "step pool/cp"), out)
	require.Equal(t, 1, strings.Count(out, "node cp-1"), out)
	require.Contains(t, out, "drain (2/8)")
	require.NotContains(t, out, "cordon")
}

func TestContainerdChangeCountsHostsOrNamesThem(t *testing.T) {
	before := map[string]string{"a": "1.6.20~ds1", "b": "1.6.20~ds1"}
	require.Equal(t, "1.6.20~ds1 → 1.7.35 on 2 of 2 hosts", ContainerdChange(before, map[string]string{"a": "1.7.35", "b": "1.7.35"}))
	require.Equal(t, "1.6.20~ds1 (unchanged) on b; 1.6.20~ds1 → 1.7.35 on a", ContainerdChange(before, map[string]string{"a": "1.7.35", "b": "1.6.20~ds1"}))
}
