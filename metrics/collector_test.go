package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestCollectorOneHotThroughUpgrade walks a cluster through the order of
// SPEC §4 and checks that at every stage exactly one phase/state series is 1
// per cluster, step and pool, and that it is the expected one.
func TestCollectorOneHotThroughUpgrade(t *testing.T) {
	type want struct {
		cluster string
		steps   []string // state per step, in step order
		cpPool  string
		wkPool  string
	}
	tests := []struct {
		name                        string
		phase                       string
		steps                       []StepView
		cpPhase, wkPhase            string
		cpDone, wkDone, wkUpgrading int
		want                        want
	}{
		{"idle", "idle", steps(), "pending", "pending", 0, 0, 0,
			want{"idle", []string{"pending", "pending", "pending", "pending", "pending", "pending", "pending"}, "pending", "pending"}},
		{"preflight", "preflight", steps(), "pending", "pending", 0, 0, 0,
			want{"preflight", []string{"pending", "pending", "pending", "pending", "pending", "pending", "pending"}, "pending", "pending"}},
		{"cp lb running", "running", steps("running"), "pending", "pending", 0, 0, 0,
			want{"running", []string{"running", "pending", "pending", "pending", "pending", "pending", "pending"}, "pending", "pending"}},
		{"control plane running", "running", steps("done", "running"), "running", "pending", 1, 0, 0,
			want{"running", []string{"done", "running", "pending", "pending", "pending", "pending", "pending"}, "running", "pending"}},
		{"parallel step", "running", steps("done", "done", "running", "done", "running"), "done", "pending", 3, 0, 0,
			want{"running", []string{"done", "done", "running", "done", "running", "pending", "pending"}, "done", "pending"}},
		{"window closed", "paused", steps("done", "done", "done", "done", "done", "paused"), "done", "paused", 3, 2, 0,
			want{"paused", []string{"done", "done", "done", "done", "done", "paused", "pending"}, "done", "paused"}},
		{"workers running", "running", steps("done", "done", "done", "done", "done", "running"), "done", "running", 3, 2, 1,
			want{"running", []string{"done", "done", "done", "done", "done", "running", "pending"}, "done", "running"}},
		{"health checks", "running", steps("done", "done", "done", "done", "done", "done", "running"), "done", "done", 3, 5, 0,
			want{"running", []string{"done", "done", "done", "done", "done", "done", "running"}, "done", "done"}},
		{"done", "done", steps("done", "done", "done", "done", "done", "done", "done"), "done", "done", 3, 5, 0,
			want{"done", []string{"done", "done", "done", "done", "done", "done", "done"}, "done", "done"}},
		{"failed", "failed", steps("done", "failed"), "failed", "pending", 1, 0, 0,
			want{"failed", []string{"done", "failed", "pending", "pending", "pending", "pending", "pending"}, "failed", "pending"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSource{raft: leaderRaft, now: t0, clusters: []ClusterView{{
				Name: "c1", Version: "1.30.2", TargetVersion: "1.31.0", Phase: tt.phase,
				PauseReason: "window_closed", Steps: tt.steps,
				Pools: []PoolView{
					{Name: "cp", Role: "controlPlane", Phase: tt.cpPhase, NodesTotal: 3, NodesDone: tt.cpDone},
					{Name: "wk", Role: "worker", Phase: tt.wkPhase, NodesTotal: 5, NodesDone: tt.wkDone, NodesUpgrading: tt.wkUpgrading},
				},
			}}}
			s := gather(t, NewCoordinatorCollector(src))

			require.Equal(t, map[string]string{"cluster=c1": tt.want.cluster}, hot(t, s, ClusterUpgradePhase, "phase"))
			gotSteps := hot(t, s, UpgradeStepState, "state")
			require.Len(t, gotSteps, len(tt.steps))
			for i, st := range tt.steps {
				require.Equal(t, tt.want.steps[i], gotSteps["cluster=c1,step="+st.Name], st.Name)
			}
			require.Equal(t, map[string]string{"cluster=c1,pool=cp": tt.want.cpPool, "cluster=c1,pool=wk": tt.want.wkPool},
				hot(t, s, PoolUpgradePhase, "phase"))

			// A paused cluster names its reason; otherwise one 0 series.
			if tt.phase == "paused" {
				require.Equal(t, 1.0, find(t, s, MaintenancePaused, "cluster=c1,reason=window_closed"))
			} else {
				require.Equal(t, 0.0, find(t, s, MaintenancePaused, "cluster=c1,reason="))
			}
			require.Equal(t, 1, count(s, MaintenancePaused))

			// Started timestamps exist exactly for steps that have started.
			started := 0
			for _, st := range tt.steps {
				if !st.StartedAt.IsZero() {
					started++
					require.Equal(t, float64(st.StartedAt.Unix()), find(t, s, UpgradeStepStarted, "cluster=c1,step="+st.Name))
				}
			}
			require.Equal(t, started, count(s, UpgradeStepStarted))

			require.Equal(t, float64(tt.wkDone), find(t, s, PoolNodes, "cluster=c1,pool=wk,state=done"))
			require.Equal(t, float64(tt.wkUpgrading), find(t, s, PoolNodes, "cluster=c1,pool=wk,state=upgrading"))
			require.Equal(t, float64(5-tt.wkDone-tt.wkUpgrading), find(t, s, PoolNodes, "cluster=c1,pool=wk,state=pending"))
		})
	}
}

// TestCollectorExposition pins the exact text of a small cluster's step and
// version series, the form dashboards and rules depend on.
func TestCollectorExposition(t *testing.T) {
	src := &fakeSource{raft: leaderRaft, now: t0, clusters: []ClusterView{{
		Name: "c1", Version: "1.30.2", TargetVersion: "1.31.0", Phase: "running",
		Steps: []StepView{
			{Name: "control_plane_lb", State: "done", StartedAt: t0},
			{Name: "control_plane", State: "running", StartedAt: t0.Add(90 * time.Second), Expected: 30 * time.Minute},
		},
		NodesPerVersion: map[string]int{"1.30.2": 4, "1.31.0": 2},
		EndOfSupport:    time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
	}}}
	const want = `
# HELP molt_upgrade_step_expected_duration_seconds Predicted duration of the step from the dry-run plan, when known.
# TYPE molt_upgrade_step_expected_duration_seconds gauge
molt_upgrade_step_expected_duration_seconds{cluster="c1",step="control_plane"} 1800
# HELP molt_upgrade_step_started_timestamp_seconds Unix time the step last began running (resumed steps: when they resumed).
# TYPE molt_upgrade_step_started_timestamp_seconds gauge
molt_upgrade_step_started_timestamp_seconds{cluster="c1",step="control_plane"} 1.79532009e+09
molt_upgrade_step_started_timestamp_seconds{cluster="c1",step="control_plane_lb"} 1.79532e+09
# HELP molt_cluster_nodes Nodes of the cluster running each kubelet version.
# TYPE molt_cluster_nodes gauge
molt_cluster_nodes{cluster="c1",version="1.30.2"} 4
molt_cluster_nodes{cluster="c1",version="1.31.0"} 2
# HELP molt_cluster_info Always 1; labels carry the cluster's current (status) and target (spec) version.
# TYPE molt_cluster_info gauge
molt_cluster_info{cluster="c1",target_version="1.31.0",version="1.30.2"} 1
# HELP molt_cluster_end_of_support_timestamp_seconds Unix time the cluster's current minor version reaches end of support.
# TYPE molt_cluster_end_of_support_timestamp_seconds gauge
molt_cluster_end_of_support_timestamp_seconds{cluster="c1"} 1.7987616e+09
`
	err := testutil.CollectAndCompare(NewCoordinatorCollector(src), strings.NewReader(want),
		UpgradeStepExpected, UpgradeStepStarted, ClusterNodes, ClusterInfo, ClusterEndOfSupport)
	require.NoError(t, err)
}

func TestCollectorRaft(t *testing.T) {
	tests := []struct {
		name      string
		raft      RaftView
		wantState string
	}{
		{"leader", leaderRaft, "leader"},
		{"follower", RaftView{State: "Follower", Term: 3, HasLeader: true}, "follower"},
		{"candidate without leader", RaftView{State: "Candidate", Term: 4}, "candidate"},
		{"shutdown", RaftView{State: "Shutdown"}, "shutdown"},
		{"empty state but leader flag", RaftView{Leader: true, HasLeader: true}, "leader"},
		{"unrecognised state", RaftView{State: "Confused"}, Unknown},
		{"halted follower", RaftView{State: "Follower", Term: 3, HasLeader: true, AppliedIndex: 57, Halted: true, HaltedIndex: 58}, "follower"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := gather(t, NewCoordinatorCollector(&fakeSource{raft: tt.raft, now: t0}))
			require.Equal(t, map[string]string{"": tt.wantState}, hot(t, s, RaftState, "state"))
			require.Equal(t, float64(tt.raft.Term), find(t, s, RaftTerm, ""))
			require.Equal(t, float64(tt.raft.LastIndex), find(t, s, RaftLastLogIndex, ""))
			require.Equal(t, float64(tt.raft.CommitIndex), find(t, s, RaftCommitIndex, ""))
			require.Equal(t, float64(tt.raft.AppliedIndex), find(t, s, RaftAppliedIndex, ""))
			require.Equal(t, b2f(tt.raft.HasLeader), find(t, s, RaftHasLeader, ""))
			require.Equal(t, b2f(tt.raft.Halted), find(t, s, RaftHalted, ""))
			require.Equal(t, float64(tt.raft.HaltedIndex), find(t, s, RaftHaltedIndex, ""))
		})
	}
}

// TestCollectorFollowerExportsOnlyRaft: cluster and agent state comes from
// the leader alone, so alert expressions never see two copies of a cluster.
func TestCollectorFollowerExportsOnlyRaft(t *testing.T) {
	src := &fakeSource{
		raft:     RaftView{State: "Follower", HasLeader: true},
		now:      t0,
		clusters: []ClusterView{{Name: "c1", Phase: "running", Steps: steps("running")}},
		agents:   []AgentView{{Cluster: "c1", Node: "n1", LastSeen: t0}},
	}
	for _, s := range gather(t, NewCoordinatorCollector(src)) {
		require.True(t, strings.HasPrefix(s.name, "molt_raft_"), "follower exported %s", s.name)
	}
}

func TestCollectorUnknownValuesStayOneHot(t *testing.T) {
	src := &fakeSource{raft: leaderRaft, now: t0, clusters: []ClusterView{{
		Name: "c1", Phase: "rebalancing",
		Steps: []StepView{{Name: "addons", State: "exploding"}},
		Pools: []PoolView{{Name: "wk", Phase: "teleporting"}},
	}}}
	s := gather(t, NewCoordinatorCollector(src))
	require.Equal(t, map[string]string{"cluster=c1": Unknown}, hot(t, s, ClusterUpgradePhase, "phase"))
	require.Equal(t, map[string]string{"cluster=c1,step=addons": Unknown}, hot(t, s, UpgradeStepState, "state"))
	require.Equal(t, map[string]string{"cluster=c1,pool=wk": Unknown}, hot(t, s, PoolUpgradePhase, "phase"))
}

func TestCollectorPoolNodes(t *testing.T) {
	tests := []struct {
		name string
		pool PoolView
		want map[string]float64
	}{
		{"partition", PoolView{Name: "p", NodesTotal: 10, NodesDone: 4, NodesUpgrading: 2, NodesFailed: 1},
			map[string]float64{"pending": 3, "upgrading": 2, "done": 4, "failed": 1}},
		{"inconsistent view clamps pending at 0", PoolView{Name: "p", NodesTotal: 2, NodesDone: 2, NodesUpgrading: 1},
			map[string]float64{"pending": 0, "upgrading": 1, "done": 2, "failed": 0}},
		{"empty pool", PoolView{Name: "p"}, map[string]float64{"pending": 0, "upgrading": 0, "done": 0, "failed": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &fakeSource{raft: leaderRaft, now: t0, clusters: []ClusterView{{Name: "c", Pools: []PoolView{tt.pool}}}}
			s := gather(t, NewCoordinatorCollector(src))
			require.Equal(t, len(PoolNodeStates), count(s, PoolNodes))
			for state, v := range tt.want {
				require.Equal(t, v, find(t, s, PoolNodes, "cluster=c,pool=p,state="+state), state)
			}
		})
	}
}

func TestCollectorAgents(t *testing.T) {
	src := &fakeSource{raft: leaderRaft, now: t0, agents: []AgentView{
		{Cluster: "c", Node: "fresh", LastSeen: t0.Add(-15 * time.Second), Drift: true},
		{Cluster: "c", Node: "stale", LastSeen: t0.Add(-10 * time.Minute), Missing: true},
		{Cluster: "c", Node: "never", Missing: true},
		{Cluster: "c", Node: "ahead", LastSeen: t0.Add(time.Second)}, // another member's clock ran ahead
	}}
	s := gather(t, NewCoordinatorCollector(src))
	require.Equal(t, 15.0, find(t, s, AgentLastSeenAge, "cluster=c,node=fresh"))
	require.Equal(t, 600.0, find(t, s, AgentLastSeenAge, "cluster=c,node=stale"))
	require.Equal(t, 0.0, find(t, s, AgentLastSeenAge, "cluster=c,node=ahead"))
	require.Equal(t, 3, count(s, AgentLastSeenAge), "a never-seen agent has no age")
	require.Equal(t, 1.0, find(t, s, AgentMissing, "cluster=c,node=never"))
	require.Equal(t, 1.0, find(t, s, AgentMissing, "cluster=c,node=stale"))
	require.Equal(t, 0.0, find(t, s, AgentMissing, "cluster=c,node=fresh"))
	require.Equal(t, 1.0, find(t, s, NodeVersionDrift, "cluster=c,node=fresh"))
	require.Equal(t, 0.0, find(t, s, NodeVersionDrift, "cluster=c,node=stale"))
	require.Equal(t, 4, count(s, NodeVersionDrift), "one series per agent")
}

// TestCollectorDuplicatesDoNotBreakScrape: a duplicate label set would make
// Gather fail and lose every metric; the collector keeps the first.
func TestCollectorDuplicatesDoNotBreakScrape(t *testing.T) {
	c := ClusterView{Name: "c", Phase: "running", Steps: []StepView{{Name: "s", State: "running"}, {Name: "s", State: "done"}},
		Pools: []PoolView{{Name: "p"}, {Name: "p"}}}
	src := &fakeSource{raft: leaderRaft, now: t0, clusters: []ClusterView{c, c},
		agents: []AgentView{{Cluster: "c", Node: "n"}, {Cluster: "c", Node: "n"}}}
	s := gather(t, NewCoordinatorCollector(src))
	require.Equal(t, map[string]string{"cluster=c,step=s": "running"}, hot(t, s, UpgradeStepState, "state"))
	require.Equal(t, 1, count(s, ClusterInfo))
	require.Equal(t, 1, count(s, PoolInfo))
	require.Equal(t, 1, count(s, AgentMissing))
}

// TestCollectorCardinality: the series count is a function of clusters,
// steps, pools, versions and nodes only. Pods never appear in a label, so a
// cluster with many pods costs no more series than an empty one.
func TestCollectorCardinality(t *testing.T) {
	// term, last, commit, applied, has_leader, halted, halted_index,
	// one-hot state, and the leader's one series per member
	raftSeries := 7 + len(RaftStates) + len(leaderRaft.Members)
	// info, phase, paused, skew, blocked, end of support, auto-upgrade
	// state (one-hot) and failures
	perCluster := 1 + len(ClusterPhases) + 1 + 1 + 1 + 1 + len(AutoUpgradeStates) + 1
	perStep := len(StepStates) + 1 // state + started (every step below has started)
	perPool := 1 + len(PoolPhases) + len(PoolNodeStates)
	const perAgent = 3 // age + missing + version drift

	for _, tt := range []struct{ clusters, pools, nodesPerPool, versions int }{
		{0, 0, 0, 0}, {1, 1, 1, 1}, {1, 3, 10, 2}, {3, 4, 50, 2},
	} {
		var clusters []ClusterView
		var agents []AgentView
		for c := range tt.clusters {
			cv := ClusterView{Name: nodeName(c), Phase: "running", EndOfSupport: t0, NodesPerVersion: map[string]int{}, Steps: steps("running", "running", "running", "running", "running", "running", "running")}
			for v := range tt.versions {
				cv.NodesPerVersion[nodeName(v)] = 1
			}
			for p := range tt.pools {
				cv.Pools = append(cv.Pools, PoolView{Name: nodeName(p), NodesTotal: tt.nodesPerPool})
				for n := range tt.nodesPerPool {
					agents = append(agents, AgentView{Cluster: cv.Name, Node: nodeName(p*1000 + n), LastSeen: t0})
				}
			}
			clusters = append(clusters, cv)
		}
		s := gather(t, NewCoordinatorCollector(&fakeSource{raft: leaderRaft, now: t0, clusters: clusters, agents: agents}))
		nSteps := len(steps())
		want := raftSeries + tt.clusters*(perCluster+nSteps*perStep+tt.pools*perPool+tt.versions) + len(agents)*perAgent
		require.Len(t, s, want, "%+v", tt)
	}
}

func TestCollectorLint(t *testing.T) {
	src := &fakeSource{raft: leaderRaft, now: t0,
		clusters: []ClusterView{{Name: "c", Phase: "running", Steps: steps("running"), Pools: []PoolView{{Name: "p", NodesTotal: 1}},
			NodesPerVersion: map[string]int{"1.31.0": 1}, EndOfSupport: t0}},
		agents: []AgentView{{Cluster: "c", Node: "n", LastSeen: t0}}}
	problems, err := testutil.CollectAndLint(NewCoordinatorCollector(src))
	require.NoError(t, err)
	require.Empty(t, problems)
}

// TestCollectorStepEndStates: a pool step's end states other than done
// and failed (cancelled, resumable; rolled_back, final) are exported as
// themselves, not as unknown.
func TestCollectorStepEndStates(t *testing.T) {
	src := &fakeSource{raft: leaderRaft, now: t0, clusters: []ClusterView{{
		Name: "c1", Phase: "cancelled",
		Steps: []StepView{{Name: "pool/a", State: "cancelled"}, {Name: "pool/b", State: "rolled_back"}},
	}}}
	s := gather(t, NewCoordinatorCollector(src))
	require.Equal(t, map[string]string{"cluster=c1,step=pool/a": "cancelled", "cluster=c1,step=pool/b": "rolled_back"},
		hot(t, s, UpgradeStepState, "state"))
}

// The leader exports every member's release (molt_member_info); a
// follower, whose view may be older, does not.
func TestCollectorMemberInfo(t *testing.T) {
	const want = `
# HELP molt_member_info Exported by the leader only: 1 for each coordinator member, labelled with the molt release it runs as the leader knows it (source: self, member — it answered — , record, or assumed — it did not answer: 0.1.0 is assumed).
# TYPE molt_member_info gauge
molt_member_info{member="m1",source="self",version="0.2.0"} 1
molt_member_info{member="m2",source="assumed",version="0.1.0"} 1
`
	require.NoError(t, testutil.CollectAndCompare(NewCoordinatorCollector(&fakeSource{raft: leaderRaft, now: t0}), strings.NewReader(want), MemberInfo))
	follower := leaderRaft
	follower.Leader, follower.State = false, "Follower"
	require.Zero(t, testutil.CollectAndCount(NewCoordinatorCollector(&fakeSource{raft: follower, now: t0}), MemberInfo))
}

// TestCollectorSequences: per sequence and version the stages done, the
// hold and the soak's end (absent when no soak runs); a follower exports
// none, and a duplicate is left out.
func TestCollectorSequences(t *testing.T) {
	seqs := []SequenceView{
		{Sequence: "fleet", Version: "1.34.4", Reached: 1, Held: true},
		{Sequence: "fleet", Version: "1.34.5", SoakEnds: t0.Add(time.Hour)},
		{Sequence: "fleet", Version: "1.34.5", Reached: 2},
	}
	s := gather(t, NewCoordinatorCollector(&fakeSource{raft: leaderRaft, now: t0, seqs: seqs}))
	require.Equal(t, 1.0, find(t, s, SequenceStage, "sequence=fleet,version=1.34.4"))
	require.Equal(t, 0.0, find(t, s, SequenceStage, "sequence=fleet,version=1.34.5"))
	require.Equal(t, 1.0, find(t, s, SequenceHeld, "sequence=fleet,version=1.34.4"))
	require.Equal(t, 0.0, find(t, s, SequenceHeld, "sequence=fleet,version=1.34.5"))
	require.Equal(t, float64(t0.Add(time.Hour).Unix()), find(t, s, SequenceSoakEnd, "sequence=fleet,version=1.34.5"))
	require.Equal(t, 1, count(s, SequenceSoakEnd))
	require.Equal(t, 2, count(s, SequenceStage))

	for _, x := range gather(t, NewCoordinatorCollector(&fakeSource{raft: RaftView{State: "Follower"}, now: t0, seqs: seqs})) {
		require.False(t, strings.HasPrefix(x.name, "molt_rollout_sequence"), "follower exported %s", x.name)
	}
}
