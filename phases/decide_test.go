package phases

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestUpgradeRunsInSpecOrder(t *testing.T) {
	c := testCluster(1, 3, 1, 2, 2)
	s := newSim(t, c, MustParseVersion("1.34.4"), Options{})
	s.run(10_000)
	require.Equal(t, UpgradeDone, s.u.State)
	require.Equal(t, []string{"pool/cplb", "pool/cp", "addons", "lifecycle", "pool/lb", "pool/w0", "pool/w1", "health"}, s.history)
	for _, n := range s.u.Nodes {
		require.Equal(t, StateDone, n.State, n.Node)
		require.Equal(t, MustParseVersion("1.34.4"), n.Version)
	}
	for _, st := range s.u.Steps {
		require.False(t, st.StartedAt.IsZero(), st.ID)
		require.False(t, st.FinishedAt.Before(st.StartedAt), st.ID)
	}
}

func TestWorkersWaitForLoadBalancerPool(t *testing.T) {
	c := testCluster(1, 1, 2, 3)
	s := newSim(t, c, MustParseVersion("1.34.4"), Options{})
	// Finish the control plane, then look at what may start.
	for {
		st, _ := s.u.Step("pool/cp")
		if st.State == StateDone {
			break
		}
		require.True(t, s.step())
	}
	d := Decide(s.u, s.now, Open)
	var started []string
	for _, a := range d.Actions {
		if a.Kind == ActStartStep {
			started = append(started, a.Step)
		}
	}
	require.ElementsMatch(t, []string{"addons", "lifecycle", "pool/lb"}, started)
}

func TestDecideIsDeterministicAndPure(t *testing.T) {
	c := testCluster(1, 3, 1, 5)
	u := NewUpgrade("u", c, MustParseVersion("1.34.4"), Options{}, time.Unix(0, 0))
	rev := u.Revision
	now := time.Unix(100, 0)
	a, b := Decide(u, now, Open), Decide(u, now, Open)
	require.Equal(t, a, b)
	require.Equal(t, rev, u.Revision, "Decide must not modify the upgrade")
	require.Equal(t, []Action{{ID: "u/start/pool/cplb", Kind: ActStartStep, Upgrade: "u", Step: "pool/cplb"}}, a.Actions)
}

func TestConcurrencyAndMinimumAvailable(t *testing.T) {
	c := testCluster(1, 1, 0, 10)
	c.Pools[2].Settings = UpgradeSettings{ConcurrentNodes: 5, MinimumAvailableNodes: 7}
	require.NoError(t, c.Validate())
	s := newSim(t, c, MustParseVersion("1.34.4"), Options{})
	maxBusy := 0
	for s.step() {
		p, _ := s.u.Pool("w0")
		busy := 0
		for _, n := range s.u.PoolNodes(p) {
			if n.State == StateRunning {
				busy++
			}
		}
		maxBusy = max(maxBusy, busy)
	}
	require.Equal(t, UpgradeDone, s.u.State)
	require.Equal(t, 3, maxBusy, "10 nodes, 7 must stay available: 3 at once even though concurrentNodes is 5")
}

type shutGate struct{ closed map[Target]string }

func (g shutGate) Allow(t Target) (bool, string) {
	if r, ok := g.closed[t]; ok {
		return false, r
	}
	return true, ""
}

func TestGatePausesAndResumes(t *testing.T) {
	c := testCluster(0, 1, 0, 3)
	s := newSim(t, c, MustParseVersion("1.34.4"), Options{Automatic: true})
	// Run until the worker pool has one node in flight.
	for {
		require.True(t, s.step())
		p, _ := s.u.Pool("w0")
		if countState(s.u.PoolNodes(p), StateRunning) == 1 {
			break
		}
	}
	s.gate = shutGate{closed: map[Target]string{TargetNodes: "MAINTENANCE_WINDOW"}}
	d := Decide(s.u, s.now, s.gate)
	require.Equal(t, "MAINTENANCE_WINDOW", d.Blocked)
	var kinds []ActionKind
	inHand := false
	for _, a := range d.Actions {
		kinds = append(kinds, a.Kind)
		require.NotEqual(t, ActStartNode, a.Kind, "nothing new starts while the window is closed")
		inHand = inHand || (a.Node == "w0-0" && (a.Kind == ActRunNodeStep || a.Kind == ActDispatch))
	}
	require.Contains(t, kinds, ActPause)
	require.True(t, inHand, "the node in hand goes on")
	// Let the node in hand finish; the pool then waits, paused.
	for i := 0; i < 100; i++ {
		s.step()
	}
	require.Equal(t, "MAINTENANCE_WINDOW", s.u.PauseReason)
	p, _ := s.u.Pool("w0")
	require.Equal(t, 1, countState(s.u.PoolNodes(p), StateDone))
	require.Equal(t, 0, countState(s.u.PoolNodes(p), StateRunning))
	// The window opens again: resume and finish.
	s.gate = Open
	s.run(1000)
	require.Equal(t, UpgradeDone, s.u.State)
	require.Empty(t, s.u.PauseReason)
}

func TestProtectedNodesGoLast(t *testing.T) {
	c := testCluster(0, 1, 0, 3)
	to := MustParseVersion("1.34.4")
	for _, auto := range []bool{true, false} {
		s := newSim(t, c, to, Options{Automatic: auto})
		until := s.now.Add(7 * 24 * time.Hour)
		require.NoError(t, s.u.SetProtection("w0-0", until))
		var order []string
		sawWait := false
		for i := 0; i < 10_000 && s.u.State == UpgradeRunning; i++ {
			d := Decide(s.u, s.now, s.gate)
			for _, a := range d.Actions {
				if a.Kind == ActStartNode && a.Pool == "w0" {
					order = append(order, a.Node)
				}
			}
			if len(d.Waiting) > 0 {
				require.True(t, auto, "manual upgrades do not wait for protected pods")
				require.Equal(t, NodeWait{Node: "w0-0", Until: until, Reason: "protected-pods"}, d.Waiting[0])
				require.Equal(t, until, d.NextWake)
				sawWait = true
			}
			if len(d.Actions) == 0 && len(d.Waiting) > 0 {
				s.now = until // the coordinator sleeps until NextWake; the fake clock jumps there
				continue
			}
			s.step()
		}
		require.Equal(t, auto, sawWait)
		require.Equal(t, UpgradeDone, s.u.State)
		require.Equal(t, []string{"w0-1", "w0-2", "w0-0"}, order, "automatic=%v", auto)
	}
}

func TestFailedNodeHaltsPoolUntilRetried(t *testing.T) {
	c := testCluster(0, 1, 0, 4)
	c.Pools[1].Settings.ConcurrentNodes = 2
	s := newSim(t, c, MustParseVersion("1.34.4"), Options{})
	for s.u.Steps[0].State != StateDone || countState(s.u.Nodes[1:], StateRunning) == 0 {
		require.True(t, s.step())
	}
	n := &s.u.Nodes[1]
	p, _ := s.u.Pool(n.Pool)
	require.NoError(t, s.u.ApplyNodeStepResult(NodeStepResult{Upgrade: s.u.ID, Node: n.Node, Cursor: n.Cursor, Attempt: n.Attempt, OK: false, Message: "disk full"}, s.now))
	require.Equal(t, StateFailed, n.State)
	require.Contains(t, n.Error, "disk full")
	for _, a := range Decide(s.u, s.now, Open).Actions {
		require.NotEqual(t, ActStartNode, a.Kind)
	}
	require.Equal(t, 2, countState(s.u.PoolNodes(p), StatePending), "no node started after the failure")
	require.NoError(t, s.u.RetryNode(n.Node, s.now))
	require.Equal(t, 1, n.Attempt)
	op := s.u.OperationID(n.Node, n.Cursor, n.Attempt)
	require.Contains(t, op, "/a1")
	s.run(10_000)
	require.Equal(t, UpgradeDone, s.u.State)
}

func TestStaleTransitionsChangeNothing(t *testing.T) {
	c := testCluster(0, 1, 0, 2)
	u := NewUpgrade("u", c, MustParseVersion("1.34.4"), Options{}, time.Unix(0, 0))
	rev := u.Revision
	for _, a := range []Action{
		{Kind: ActStartStep, Upgrade: "u", Step: "pool/w0"}, // deps not done
		{Kind: ActCompleteStep, Upgrade: "u", Step: "pool/cp"},
		{Kind: ActStartNode, Upgrade: "u", Node: "cp-0"}, // pool step not running
		{Kind: ActFinish, Upgrade: "u"},
		{Kind: ActResume, Upgrade: "u"},
		{Kind: ActStartStep, Upgrade: "other", Step: "pool/cp"},
	} {
		require.ErrorIs(t, u.Apply(a, time.Unix(1, 0)), ErrStale, a.Kind)
	}
	require.ErrorIs(t, u.ApplyNodeStepResult(NodeStepResult{Upgrade: "u", Node: "cp-0", OK: true}, time.Unix(1, 0)), ErrStale)
	require.ErrorIs(t, u.ApplyStepResult(StepResult{Upgrade: "u", Step: "health", OK: true}, time.Unix(1, 0)), ErrStale)
	require.Equal(t, rev, u.Revision)
}

func TestHealthRetriedUntilPass(t *testing.T) {
	c := testCluster(0, 1, 0)
	s := newSim(t, c, MustParseVersion("1.34.4"), Options{})
	fails := 3
	s.fail = func(a Action) bool {
		if a.Step == StepIDHealth && fails > 0 {
			fails--
			return true
		}
		return false
	}
	s.run(1000)
	h, _ := s.u.Step(StepIDHealth)
	require.Equal(t, 3, h.Attempts)
	require.Equal(t, StateDone, h.State)
}

// TestUpgradeProperties runs random clusters with random completion orders
// and random failures; the simulator checks order, budgets, control-plane
// overlap, version monotonicity and determinism after every transition.
func TestUpgradeProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		workers := rapid.SliceOfN(rapid.IntRange(1, 8), 0, 3).Draw(rt, "workers")
		c := testCluster(rapid.IntRange(0, 2).Draw(rt, "cplb"), rapid.IntRange(1, 5).Draw(rt, "cp"),
			rapid.IntRange(0, 3).Draw(rt, "lb"), workers...)
		for i := range c.Pools {
			p := &c.Pools[i]
			p.Settings.ConcurrentNodes = rapid.IntRange(0, 6).Draw(rt, "concurrent-"+p.Name)
			p.Settings.MinimumAvailableNodes = rapid.IntRange(0, len(p.Nodes)-1).Draw(rt, "minavail-"+p.Name)
		}
		if err := c.Validate(); err != nil {
			rt.Fatalf("generated invalid cluster: %v", err)
		}
		opts := Options{ConcurrentWorkerPools: rapid.IntRange(0, 3).Draw(rt, "workerPools")}
		s := newSim(rt, c, MustParseVersion("1.34.4"), opts)
		seed := rapid.Uint64().Draw(rt, "seed")
		rng := rand.New(rand.NewPCG(seed, seed))
		s.pick = func(n int) int { return rng.IntN(n) }
		failRate := rapid.IntRange(0, 20).Draw(rt, "failPercent")
		s.fail = func(Action) bool { return rng.IntN(100) < failRate }
		s.run(100_000)
		if s.u.State != UpgradeDone {
			rt.Fatalf("upgrade ended %s", s.u.State)
		}
		for _, n := range s.u.Nodes {
			if n.Version != s.u.To {
				rt.Fatalf("node %s at %s", n.Node, n.Version)
			}
		}
		if !slices.Contains(s.history, StepIDHealth) || s.history[len(s.history)-1] != StepIDHealth {
			rt.Fatalf("health is not last: %v", s.history)
		}
	})
}
