package statemachine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/raftstore/command"
)

// bigCluster registers a cluster of n workers and a control-plane node on
// a machine with releases 1.33.6 and 1.34.4, each node's agent registered
// at <node>:7443 but every 7th.
func bigCluster(t *testing.T, n int) *Machine {
	t.Helper()
	f := machineAt(t, firstOf(t, CmdPutCluster)) // releases only
	at := time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)
	spec := phases.ClusterSpec{Name: "big", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.33.6"),
		Pools: []phases.Pool{{Name: "cp", Role: phases.RoleControlPlane, Backing: phases.BackingBareMetal, Nodes: []phases.Node{{Name: "cp-0"}}},
			{Name: "workers", Role: phases.RoleWorker, Backing: phases.BackingBareMetal}}}
	for i := 1; i <= n; i++ {
		spec.Pools[1].Nodes = append(spec.Pools[1].Nodes, phases.Node{Name: fmt.Sprintf("w-%d", i)})
	}
	apply(t, f, PutClusterCmd{Spec: spec, Now: at})
	for i := 0; i <= n; i++ {
		node := fmt.Sprintf("w-%d", i)
		if i == 0 {
			node = "cp-0"
		}
		if i%7 != 3 {
			apply(t, f, AgentRegisterCmd{Cluster: "big", Node: node, Address: node + ":7443", Now: at})
		}
	}
	return f
}

// apply applies cmd through the machine's handler, as raftstore would.
func apply(t *testing.T, f *Machine, cmd Command) any {
	t.Helper()
	b, err := raftstore.Encode(cmd)
	require.NoError(t, err)
	typ, body, err := raftstore.Decode(b)
	require.NoError(t, err)
	v, err := f.Handlers()[typ](1, body)
	require.NoError(t, err, "%T", cmd)
	return v
}

// TestDerivedHostOperationsAreTheLeaders checks that a run started with a
// host plan stores the operations the leader would have put in the entry
// (0.1.0's form), while its entry carries none: a few hundred bytes at 300
// hosts, against tens of kilobytes.
func TestDerivedHostOperationsAreTheLeaders(t *testing.T) {
	f := bigCluster(t, 300)
	to := phases.MustParseVersion("1.34.4")
	in, err := f.PreflightInput("big", to)
	require.NoError(t, err)
	addrs := map[string]string{}
	for node, a := range mustCluster(t, f, "big").Agents {
		addrs[node] = a.Address
	}
	want := convert.PreflightOperationsToAPI(preflight.HostOperations("big-1", in, "", addrs))

	at := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	derived := PreflightStartCmd{Run: PreflightRun{ID: "big-1", Cluster: "big", Target: to, CreatedAt: at, Deadline: at.Add(time.Minute), HostPlan: HostPlanRing}}
	full := PreflightStartCmd{Run: PreflightRun{ID: "big-1", Cluster: "big", Target: to, CreatedAt: at, Deadline: at.Add(time.Minute), Operations: want}}
	small, err := raftstore.Encode(derived)
	require.NoError(t, err)
	large, err := raftstore.Encode(full)
	require.NoError(t, err)
	require.Less(t, len(small), 400, "the derived entry carries no operations")
	require.Greater(t, len(large), 50*len(small))
	t.Logf("entry at 301 hosts: %d bytes derived, %d bytes with the operations", len(small), len(large))

	apply(t, f, derived)
	got, err := f.Preflight("big", "big-1")
	require.NoError(t, err)
	require.Equal(t, want, got.Operations)
	require.Zero(t, got.HostPlan, "a stored run holds its operations, not the plan")
	require.Len(t, got.Operations, 301)
	require.Len(t, got.Operations["w-10"][1].ProbePeers.Addresses, preflight.ProbeFanout)
	require.Equal(t, command.BaselineVersion, MinVersion(full), "the form every release reads")
	require.Equal(t, SinceHostPlan, MinVersion(derived), "the derived form needs 0.2.0")
}

// TestHostPlanRingIsPinned holds plan 1's output for a fixed cluster:
// members of different releases derive a run's operations from the same
// entry, so the function behind a plan number never changes. A change in
// preflight.HostOperations that fails this test needs a new plan number
// (preflight_plan.go), not a new digest.
func TestHostPlanRingIsPinned(t *testing.T) {
	f := bigCluster(t, 60)
	at := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	apply(t, f, PreflightStartCmd{Run: PreflightRun{ID: "big-7", Cluster: "big", Target: phases.MustParseVersion("1.34.4"),
		CreatedAt: at, Deadline: at.Add(time.Minute), HostPlan: HostPlanRing}})
	got, err := f.Preflight("big", "big-7")
	require.NoError(t, err)
	b, err := json.Marshal(got.Operations) // maps marshal in key order
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	require.Equal(t, "fa1b1994dd18cbaa1415f71cdc8c33145fc2883fa3b04b454ebdf1138cc9005c", hex.EncodeToString(sum[:]), "plan %d's operations changed", HostPlanRing)
}

// TestUnknownHostPlanIsUnreadable checks that an entry naming a plan this
// release does not know is one it cannot read (the replica halts), not a
// refusal or a run without operations.
func TestUnknownHostPlanIsUnreadable(t *testing.T) {
	f := bigCluster(t, 3)
	at := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	b, err := raftstore.Encode(PreflightStartCmd{Run: PreflightRun{ID: "big-1", Cluster: "big", Target: phases.MustParseVersion("1.34.4"),
		CreatedAt: at, Deadline: at.Add(time.Minute), HostPlan: HostPlanRing + 1}})
	require.NoError(t, err)
	typ, body, err := raftstore.Decode(b)
	require.NoError(t, err)
	was, err := f.Snapshot()
	require.NoError(t, err)
	_, err = f.Handlers()[typ](1, body)
	require.True(t, command.CannotRead(err), "%v", err)
	after, err := f.Snapshot()
	require.NoError(t, err)
	requireSameBytes(t, was, after, "nothing changed")
}

// TestBatchedResultsApplyEachOnItsOwn checks that a batch of results
// records each as its own command would, and that a refused item keeps
// neither the others out nor changes anything.
func TestBatchedResultsApplyEachOnItsOwn(t *testing.T) {
	f := bigCluster(t, 5)
	at := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	apply(t, f, PreflightStartCmd{Run: PreflightRun{ID: "big-1", Cluster: "big", Target: phases.MustParseVersion("1.34.4"),
		CreatedAt: at, Deadline: at.Add(time.Minute), HostPlan: HostPlanRing}})
	res := func(node, op string) PreflightResultCmd {
		return PreflightResultCmd{Cluster: "big", Run: "big-1", Node: node, Result: api.OperationResult{
			ID: preflight.OperationID("big-1", node, preflight.HostOp(op)), State: api.OpSucceeded, FinishedAt: at}}
	}
	wrongNode := res("w-1", "peers")
	wrongNode.Node = "w-2"
	v := apply(t, f, PreflightResultsCmd{Now: at, Results: []PreflightResultCmd{
		res("w-1", "artifacts"), wrongNode, res("w-2", "peers"), res("w-2", "peers")}})
	errs := v.([]error)
	require.Len(t, errs, 4)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], ErrNotFound, "not w-2's operation")
	require.NoError(t, errs[2])
	require.ErrorIs(t, errs[3], phases.ErrStale, "already recorded")
	got, err := f.Preflight("big", "big-1")
	require.NoError(t, err)
	require.Len(t, got.Results, 2)
	require.Contains(t, got.Results, preflight.OperationID("big-1", "w-1", preflight.HostOpArtifacts))
	require.Contains(t, got.Results, preflight.OperationID("big-1", "w-2", preflight.HostOpPeers))
	require.Equal(t, SincePreflightResults, MinVersion(PreflightResultsCmd{}))
}

func mustCluster(t *testing.T, f *Machine, name string) ClusterRecord {
	t.Helper()
	r, err := f.Cluster(name)
	require.NoError(t, err)
	return r
}
