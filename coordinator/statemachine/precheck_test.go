package statemachine

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
)

// TestConcurrentPrechecksOfANodeResult prechecks one node result from many
// goroutines at once, as the leader does when an agent's report arrives
// twice (a retry through a follower and the original). Each precheck runs
// the transition, which appends to the node's Applied list, on its own
// copy under the read lock: with `go test -race` two copies writing into
// one backing array are a race, and without it the live state's spare
// capacity holding what a precheck appended is the same fault.
func TestConcurrentPrechecksOfANodeResult(t *testing.T) {
	f := New()
	handlers := f.Handlers()
	var index uint64
	apply := func(cmd Command) {
		t.Helper()
		b, err := raftstore.Encode(cmd)
		require.NoError(t, err)
		typ, body, err := raftstore.Decode(b)
		require.NoError(t, err)
		index++
		_, err = handlers[typ](index, body)
		require.NoError(t, err, "%s", typ)
	}
	now := time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	apply(PutReleaseCmd{Release: api.Release{Version: "1.34.4", Components: api.ReleaseComponents{
		Kubelet:    api.BinaryArtifact{URL: "http://artifacts.test/kubelet", SHA256: sum},
		Containerd: api.BinaryArtifact{URL: "http://artifacts.test/containerd", SHA256: sum, Version: "1.7.0"},
		StaticPods: map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v1.34.4"},
	}}, Now: now})
	apply(PutClusterCmd{Spec: phases.ClusterSpec{Name: "lab", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.33.6"),
		Pools: []phases.Pool{{Name: "cp", Role: phases.RoleControlPlane, Backing: phases.BackingBareMetal,
			Nodes: []phases.Node{{Name: "cp-1", Address: "10.0.0.11"}, {Name: "cp-2", Address: "10.0.0.12"}, {Name: "cp-3", Address: "10.0.0.13"}}}}}, Now: now})
	apply(StartUpgradeCmd{Cluster: "lab", To: phases.MustParseVersion("1.34.4"),
		// The molt layout: the node steps of the control plane start at
		// once, with no backup step before them (what this test is about).
		Options: phases.Options{StepLayout: phases.StepLayoutMolt}, Now: now})

	// cp-1 goes first, its kubelet step fails once and is retried: static
	// pods, containerd and the failed kubelet leave three operations in
	// Applied, which append grew to a capacity of four. (The pool has
	// three nodes: a failed node of a pool of one may not be retried.)
	live := func() *phases.NodeTask {
		n, ok := f.st.Clusters["lab"].Upgrade.Node("cp-1")
		require.True(t, ok)
		return n
	}
	u, err := f.Upgrade("lab")
	require.NoError(t, err)
	result := func(n *phases.NodeTask, ok bool) NodeStepResultCmd {
		return NodeStepResultCmd{Cluster: "lab", Now: now, Result: phases.NodeStepResult{
			Upgrade: u.ID, Node: n.Node, Cursor: n.Cursor, Attempt: n.Attempt, OK: ok, Message: "test"}}
	}
	atKubelet := func(u *phases.Upgrade, n *phases.NodeTask) bool {
		s, ok := u.CurrentStep(n)
		return ok && s.Op != nil && s.Op.Component == phases.ComponentKubelet
	}
	for range 30 {
		now = now.Add(time.Minute)
		u, err = f.Upgrade("lab")
		require.NoError(t, err)
		n, _ := u.Node("cp-1")
		if n.State == phases.StateRunning && n.Attempt == 1 && atKubelet(u, n) {
			break
		}
		switch n.State {
		case phases.StateRunning:
			apply(result(n, !atKubelet(u, n)))
		case phases.StateFailed:
			apply(RetryNodeCmd{Cluster: "lab", Node: "cp-1", Now: now})
		default:
			if acts := phases.Decide(u, now, nil).Actions; len(acts) > 0 {
				apply(AdvanceCmd{Cluster: "lab", Upgrade: u.ID, Actions: acts, Now: now})
			}
		}
	}
	n := live()
	require.Equal(t, phases.StateRunning, n.State)
	require.Equal(t, 1, n.Attempt, "cp-1 is on its kubelet step's retry")
	require.Len(t, n.Applied, 3)
	require.Greater(t, cap(n.Applied), len(n.Applied), "the live list has room an append of a shallow copy would write into")
	before, err := f.Snapshot()
	require.NoError(t, err)

	cmd := result(n, true)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = f.Precheck(cmd) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}

	after, err := f.Snapshot()
	require.NoError(t, err)
	requireSameBytes(t, before, after, "a precheck changed the state")
	n = live()
	require.Zero(t, n.Applied[:cap(n.Applied)][len(n.Applied)], "a precheck wrote into the live state's Applied list")

	// The result itself still applies, once.
	apply(cmd)
	n = live()
	require.Len(t, n.Applied, 4)
	require.Equal(t, phases.ComponentKubelet, n.Applied[3].Component)
}
