package metrics

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestCollectorInvariants checks, for arbitrary views (including values
// outside the fixed sets and inconsistent node counts), that every one-hot
// group has exactly one series at 1 and that a pool's node states sum to at
// least its size and exactly to it when the counts are consistent.
func TestCollectorInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		state := func(set []string, label string) string {
			return rapid.OneOf(rapid.SampledFrom(set), rapid.StringMatching(`[a-z]{0,6}`)).Draw(rt, label)
		}
		cv := ClusterView{Name: "c", Phase: state(ClusterPhases, "phase")}
		for i := range rapid.IntRange(0, 8).Draw(rt, "steps") {
			cv.Steps = append(cv.Steps, StepView{Name: nodeName(i), State: state(StepStates, "step")})
		}
		for i := range rapid.IntRange(0, 4).Draw(rt, "pools") {
			cv.Pools = append(cv.Pools, PoolView{
				Name: nodeName(i), Phase: state(PoolPhases, "pool"),
				NodesTotal: rapid.IntRange(0, 50).Draw(rt, "total"), NodesDone: rapid.IntRange(0, 50).Draw(rt, "done"),
				NodesUpgrading: rapid.IntRange(0, 20).Draw(rt, "upgrading"), NodesFailed: rapid.IntRange(0, 5).Draw(rt, "failed"),
			})
		}
		raft := RaftView{State: state([]string{"Leader", "Follower", "Candidate", "Shutdown"}, "raft"), Leader: true}
		s := gather(rt, NewCoordinatorCollector(&fakeSource{raft: raft, now: t0, clusters: []ClusterView{cv}}))

		require.Len(rt, hot(rt, s, ClusterUpgradePhase, "phase"), 1)
		require.Len(rt, hot(rt, s, UpgradeStepState, "state"), len(cv.Steps))
		require.Len(rt, hot(rt, s, PoolUpgradePhase, "phase"), len(cv.Pools))
		require.Len(rt, hot(rt, s, RaftState, "state"), 1)
		for _, p := range cv.Pools {
			sum := 0.0
			for _, st := range PoolNodeStates {
				sum += find(rt, s, PoolNodes, "cluster=c,pool="+p.Name+",state="+st)
			}
			counted := p.NodesDone + p.NodesUpgrading + p.NodesFailed
			require.Equal(rt, float64(max(p.NodesTotal, counted)), sum)
		}
	})
}
