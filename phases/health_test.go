package phases

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

var gates = Options{StepLayout: StepLayoutGates}

// workersCluster is one control-plane node and a worker pool of n nodes.
func workersCluster(n int, settings func(*UpgradeSettings)) *ClusterSpec {
	c := testCluster(0, 1, 0, n)
	if settings != nil {
		settings(&c.Pools[1].Settings)
	}
	return c
}

// failKubeletOf fails the kubelet operation of the named nodes (on their
// way forward).
func failKubeletOf(nodes ...string) func(Action) bool {
	return func(a Action) bool {
		return !a.Rollback && slices.Contains(nodes, a.Node) && a.NodeStep.Op != nil &&
			a.NodeStep.Op.Kind == OpUpgradeBinary && a.NodeStep.Op.Component == ComponentKubelet
	}
}

// TestFailureBudgetStopsEverything: with the default budget (1) the first
// failed worker fails its pool; nothing else starts anywhere; the upgrade
// ends failed with the reason; the other workers were not touched.
func TestFailureBudgetStopsEverything(t *testing.T) {
	c := workersCluster(3, nil)
	s := newSim(t, c, v1344, gates)
	s.noRetry = true
	s.fail = failKubeletOf("w0-0")
	s.run(10_000)
	require.Equal(t, UpgradeFailed, s.u.State)
	require.Contains(t, s.u.Reason, "pool w0: 1 of 3 nodes failed, its failure budget is 1 (maxFailedNodes)")
	require.Contains(t, s.u.Reason, "w0-0")
	p, _ := s.u.Pool("w0")
	for _, n := range s.u.PoolNodes(p)[1:] {
		require.Equal(t, StatePending, n.State, "node %s was not touched", n.Node)
	}
	st, _ := s.u.Step("pool/w0")
	require.Equal(t, StateFailed, st.State)
	health, _ := s.u.Step(StepIDHealth)
	require.Equal(t, StatePending, health.State)
	require.ErrorIs(t, s.u.PoolCommand("w0", PoolResume, s.now), ErrCommandRefused)
}

// TestFailureBudgetOfTwo: one failed node leaves the pool going; the
// second fails it.
func TestFailureBudgetOfTwo(t *testing.T) {
	c := workersCluster(4, func(s *UpgradeSettings) { s.MaxFailedNodes = ptr(2) })
	s := newSim(t, c, v1344, gates)
	s.noRetry = true
	s.fail = failKubeletOf("w0-0", "w0-2")
	s.run(10_000)
	require.Equal(t, UpgradeFailed, s.u.State)
	n1, _ := s.u.Node("w0-1")
	require.Equal(t, StateDone, n1.State, "the pool went on after its first failure")
	n3, _ := s.u.Node("w0-3")
	require.Equal(t, StatePending, n3.State, "nothing started after the second")
}

// TestAutoRollbackRestoresInReverseOrder: with rollback auto, a pool past
// its budget takes back every node it touched, the failed one first, then
// the others in reverse order, each through cordon, drain, the agent's
// undo of the operations that changed it (kubelet first), Ready at the old
// version and uncordon; the upgrade ends failed with the reason.
func TestAutoRollbackRestoresInReverseOrder(t *testing.T) {
	c := workersCluster(4, func(s *UpgradeSettings) { s.Rollback = RollbackAuto })
	s := newSim(t, c, v1344, gates)
	s.noRetry = true
	s.fail = failKubeletOf("w0-2")
	var order []string
	var undo []Action
	s.observe = func() {
		for _, a := range Decide(s.u, s.now, Open).Actions {
			if a.Kind == ActStartNode && a.Rollback && !slices.Contains(order, a.Node) {
				order = append(order, a.Node)
			}
			if a.Kind == ActDispatch && a.Rollback && !slices.ContainsFunc(undo, func(b Action) bool { return b.ID == a.ID }) {
				undo = append(undo, a)
			}
		}
	}
	s.run(10_000)
	require.Equal(t, UpgradeFailed, s.u.State)
	require.Contains(t, s.u.Reason, "; rolled back: w0")
	require.Equal(t, []string{"w0-2", "w0-1", "w0-0"}, order)
	p, _ := s.u.Pool("w0")
	for _, n := range s.u.PoolNodes(p) {
		require.Equal(t, v1336, n.Version, "node %s back at the old version", n.Node)
	}
	n3, _ := s.u.Node("w0-3")
	require.False(t, n3.Rollback, "a node the upgrade did not touch is not rolled back")
	st, _ := s.u.Step("pool/w0")
	require.Equal(t, StateRolledBack, st.State)
	// The failed node's undo targets the kubelet operation that failed and
	// the containerd one before it, kubelet first.
	n2, _ := s.u.Node("w0-2")
	kubelet, _ := n2.AppliedOpOf(ComponentKubelet)
	containerd, _ := n2.AppliedOpOf(ComponentContainerd)
	var targets []string
	for _, a := range undo {
		if a.Node == "w0-2" {
			targets = append(targets, a.NodeStep.Op.Component)
		}
	}
	require.Equal(t, []string{ComponentKubelet, ComponentContainerd}, targets)
	require.Contains(t, kubelet, "/w0-2/")
	require.NotEqual(t, kubelet, containerd)
}

// TestManualRollbackAfterFailure: with the default policy the failed
// upgrade waits for an operator; a rollback of the pool opens it again,
// takes the touched nodes back and ends failed again.
func TestManualRollbackAfterFailure(t *testing.T) {
	c := workersCluster(3, nil)
	s := newSim(t, c, v1344, gates)
	s.noRetry = true
	s.fail = failKubeletOf("w0-1")
	s.run(10_000)
	require.Equal(t, UpgradeFailed, s.u.State)
	reason := s.u.Reason
	checkPoolCommand(t, s.u, "cp", PoolRollback, "rollback-skew") // w0-0 runs the new version
	require.NoError(t, s.u.PoolCommand("w0", PoolRollback, s.now))
	require.Equal(t, UpgradeRunning, s.u.State)
	s.run(10_000)
	require.Equal(t, UpgradeFailed, s.u.State)
	require.Equal(t, reason+"; rolled back: w0", s.u.Reason)
	for _, name := range []string{"w0-0", "w0-1"} {
		n, _ := s.u.Node(name)
		require.True(t, n.Rollback, name)
		require.Equal(t, v1336, n.Version, name)
	}
	checkPoolCommand(t, s.u, "w0", PoolRollback, "already-rolling-back")
	// With the workers back, the control plane may go back too.
	require.NoError(t, s.u.PoolCommand("cp", PoolRollback, s.now))
	s.run(10_000)
	cp, _ := s.u.Node("cp-0")
	require.Equal(t, v1336, cp.Version)
	require.Equal(t, UpgradeFailed, s.u.State)
}

// TestBareMetalRollbackRules: never, while running, before start.
func TestBareMetalRollbackRules(t *testing.T) {
	u := NewUpgrade("u", workersCluster(2, func(s *UpgradeSettings) { s.Rollback = RollbackNever }), v1344, gates, time.Time{})
	checkPoolCommand(t, u, "w0", PoolRollback, "rollback-never")
	u = NewUpgrade("u", workersCluster(2, nil), v1344, gates, time.Time{})
	checkPoolCommand(t, u, "w0", PoolRollback, "rollback-while-running")
	u.State = UpgradeCancelled
	checkPoolCommand(t, u, "w0", PoolRollback, "rollback-before-start")
	c := workersCluster(2, func(s *UpgradeSettings) { s.Rollback = RollbackAuto })
	c.Pools[0].Settings.Rollback = RollbackAuto
	var ve *ValidationError
	require.ErrorAs(t, c.Validate(), &ve)
	require.Equal(t, "rollback-policy", ve.Rule)
}

// TestHealthStepGivesUp: the final health step is retried until
// HealthTimeout, then fails the upgrade with its last message.
func TestHealthStepGivesUp(t *testing.T) {
	opts := gates
	opts.HealthTimeout = 10 * time.Minute
	s := newSim(t, workersCluster(1, nil), v1344, opts)
	s.fail = func(a Action) bool { return a.Kind == ActRunStep && a.Step == StepIDHealth }
	s.run(10_000)
	require.Equal(t, UpgradeFailed, s.u.State)
	require.Contains(t, s.u.Reason, "step health: did not pass within 10m0s (health timeout)")
	st, _ := s.u.Step(StepIDHealth)
	require.Equal(t, StateFailed, st.State)
	require.GreaterOrEqual(t, st.FinishedAt.Sub(st.StartedAt), 10*time.Minute)
}

// describe is an upgrade's steps, pools and nodes in a line each, for
// failure messages.
func describe(u *Upgrade, now time.Time) string {
	var b strings.Builder
	for _, s := range u.Steps {
		fmt.Fprintf(&b, "step %s %s\n", s.ID, s.State)
	}
	for _, p := range u.Pools {
		fmt.Fprintf(&b, "pool %s fail=%q rollingBack=%v cancelled=%v\n", p.Name, p.FailReason, p.RollingBack, p.Cancelled)
	}
	for _, n := range u.Nodes {
		fmt.Fprintf(&b, "node %s %s cursor=%d path=%d rollback=%v v=%s err=%s\n", n.Node, n.State, n.Cursor, n.Path, n.Rollback, n.Version, n.Error)
	}
	fmt.Fprintf(&b, "decide: %v\n", Decide(u, now, Open).Actions)
	return b.String()
}

// gatesAt builds an upgrade whose pool w0 (3 nodes, concurrency 3) has a
// PromQL gate held for two minutes, with node w0-0 at its gates step since
// t0, and every step before the pool done.
func gatesAt(t0 time.Time, opts Options) (*Upgrade, *NodeTask) {
	c := workersCluster(3, func(s *UpgradeSettings) {
		s.ConcurrentNodes = 3
		s.HealthGates = []HealthGate{{Name: "errors", Expr: "sum(rate(probe_failures_total[1m])) == 0", For: 2 * time.Minute, Prometheus: "http://prometheus:9090"}}
	})
	u := NewUpgrade("u", c, v1344, opts, t0)
	for i := range u.Steps {
		if u.Steps[i].ID != "pool/w0" && u.Steps[i].ID != StepIDHealth {
			u.Steps[i].State = StateDone
		}
	}
	st, _ := u.Step("pool/w0")
	st.State, st.StartedAt = StateRunning, t0
	p, _ := u.Pool("w0")
	n, _ := u.Node("w0-0")
	n.State, n.Cursor, n.StartedAt, n.StepStartedAt = StateRunning, len(p.NodeSteps)-1, t0, t0
	return u, n
}

// observe commits a gates observation for node n at now.
func observe(t *testing.T, u *Upgrade, n *NodeTask, now time.Time, checks ...GateCheck) {
	t.Helper()
	require.NoError(t, u.ApplyNodeStepResult(NodeStepResult{Upgrade: u.ID, Node: n.Node, Cursor: n.Cursor, Attempt: n.Attempt,
		OK: true, Gates: checks, RetryAt: now.Add(10 * time.Second)}, now))
}

func starts(d Decision) []string {
	var out []string
	for _, a := range d.Actions {
		if a.Kind == ActStartNode {
			out = append(out, a.Node)
		}
	}
	return out
}

var green = []GateCheck{{Name: CheckNodeReady, OK: true}, {Name: CheckAgent, OK: true}, {Name: CheckWorkloads, OK: true}, {Name: "errors", OK: true, Value: "0"}}

func withRed(name, value string) []GateCheck {
	out := slices.Clone(green)
	for i := range out {
		if out[i].Name == name {
			out[i].OK, out[i].Value = false, value
		}
	}
	return out
}

// TestRedGateHoldsThePool: while a node's gate is red, no other node of
// its pool starts, even with room in its budget; the node says which gate
// and its last value. Green again, the pool goes on while the node soaks.
func TestRedGateHoldsThePool(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	u, n := gatesAt(t0, Options{StepLayout: StepLayoutGates, GateTimeout: 10 * time.Minute})
	p, _ := u.Pool("w0")
	require.Equal(t, NodeGates, p.NodeSteps[len(p.NodeSteps)-1].Kind)
	require.Equal(t, 2*time.Minute, p.GateSoak())

	observe(t, u, n, t0.Add(5*time.Second), withRed("errors", "0.25")...)
	require.Equal(t, "errors", n.RedGate)
	require.Equal(t, "gate errors red: 0.25", n.Waiting)
	require.Equal(t, StateRunning, n.State)
	d := Decide(u, t0.Add(15*time.Second), Open)
	require.Empty(t, starts(d), "a red gate holds the pool")
	require.Len(t, d.Actions, 1, "the gates are looked at again")
	require.Equal(t, NodeGates, d.Actions[0].NodeStep.Kind)

	observe(t, u, n, t0.Add(20*time.Second), green...)
	require.Empty(t, n.RedGate)
	require.Equal(t, t0.Add(20*time.Second), n.GreenSince)
	require.Equal(t, []string{"w0-1", "w0-2"}, starts(Decide(u, t0.Add(30*time.Second), Open)), "green: the pool goes on")
}

// TestGateDeadlines walks one node's gates step on an injected clock: a
// red gate waits until GateTimeout after the step started and then fails
// the node; the soak restarts on every red observation and passes once
// every check held for the longest For.
func TestGateDeadlines(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	opts := Options{StepLayout: StepLayoutGates, GateTimeout: 10 * time.Minute}

	t.Run("soak restarts on red", func(t *testing.T) {
		u, n := gatesAt(t0, opts)
		observe(t, u, n, t0, green...)
		require.Equal(t, "gates green for 0s of 2m0s", n.Waiting)
		require.Equal(t, t0.Add(10*time.Second), n.RetryAt, "looked at again at the coordinator's interval")
		observe(t, u, n, t0.Add(90*time.Second), green...)
		require.Equal(t, "gates green for 1m30s of 2m0s", n.Waiting)
		observe(t, u, n, t0.Add(100*time.Second), withRed(CheckWorkloads, "Deployment default/web: 1 of 2 ready")...)
		require.Equal(t, "gate workloads red: Deployment default/web: 1 of 2 ready", n.Waiting)
		require.True(t, n.GreenSince.IsZero())
		observe(t, u, n, t0.Add(110*time.Second), green...)
		observe(t, u, n, t0.Add(229*time.Second), green...)
		require.Equal(t, StateRunning, n.State, "1m59s green is not 2m")
		require.Equal(t, t0.Add(230*time.Second), n.RetryAt, "looked at again when the soak ends")
		observe(t, u, n, t0.Add(230*time.Second), green...)
		require.Equal(t, StateDone, n.State)
		require.Empty(t, n.Waiting)
	})
	t.Run("red past the deadline fails the node", func(t *testing.T) {
		u, n := gatesAt(t0, opts)
		observe(t, u, n, t0.Add(9*time.Minute+59*time.Second), withRed("errors", "query: connection refused")...)
		require.Equal(t, StateRunning, n.State)
		observe(t, u, n, t0.Add(10*time.Minute), withRed("errors", "0.5")...)
		require.Equal(t, StateFailed, n.State)
		require.Equal(t, "gates: gate errors red: 0.5, still after the 10m0s gate deadline", n.Error)
		require.Empty(t, n.RedGate)
		// The default budget (1) fails the pool at once.
		d := Decide(u, t0.Add(10*time.Minute), Open)
		require.Len(t, d.Actions, 1)
		require.Equal(t, ActFailPool, d.Actions[0].Kind)
	})
	t.Run("green while soaking past the deadline passes", func(t *testing.T) {
		u, n := gatesAt(t0, opts)
		observe(t, u, n, t0.Add(9*time.Minute), green...)
		observe(t, u, n, t0.Add(11*time.Minute), green...)
		require.Equal(t, StateDone, n.State)
	})
	t.Run("no deadline holds until green", func(t *testing.T) {
		u, n := gatesAt(t0, Options{StepLayout: StepLayoutGates})
		observe(t, u, n, t0.Add(24*time.Hour), withRed(CheckAgent, "missing")...)
		require.Equal(t, StateRunning, n.State)
		require.Equal(t, CheckAgent, n.RedGate)
	})
	t.Run("a result without checks", func(t *testing.T) {
		u, n := gatesAt(t0, opts)
		require.NoError(t, u.ApplyNodeStepResult(NodeStepResult{Upgrade: u.ID, Node: n.Node, Cursor: n.Cursor, Attempt: n.Attempt,
			Message: "no access to the cluster's API server"}, t0))
		require.Equal(t, "gate gates red: no access to the cluster's API server", n.Waiting)
	})
}

// TestFailingHaltsOtherPools: a pool past its budget stops the others
// running beside it: their started nodes finish, nothing new starts, and
// their steps halt as cancelled; the upgrade ends failed with the reason.
func TestFailingHaltsOtherPools(t *testing.T) {
	c := testCluster(0, 1, 0, 3, 3)
	s := newSim(t, c, v1344, Options{StepLayout: StepLayoutGates, ConcurrentWorkerPools: 2})
	s.noRetry = true
	s.fail = failKubeletOf("w0-1")
	s.run(10_000)
	require.Equal(t, UpgradeFailed, s.u.State)
	require.True(t, strings.HasPrefix(s.u.Reason, "pool w0: 1 of 3 nodes failed"), s.u.Reason)
	w1, _ := s.u.Step("pool/w1")
	require.Equal(t, StateCancelled, w1.State)
	p, _ := s.u.Pool("w1")
	for _, n := range s.u.PoolNodes(p) {
		require.NotEqual(t, StateRunning, n.State)
	}
	require.Equal(t, StatePending, s.u.Nodes[len(s.u.Nodes)-1].State, "w1's last node never started")
	require.ErrorIs(t, s.u.RetryNode("w0-1", s.now), ErrStale, "a failed upgrade retries nothing")
}

// TestFailuresWithinBudgetWaitForRetry: a pool with failures below its
// budget upgrades every other node, then waits for the failed ones to be
// retried; a retry that passes completes the upgrade.
func TestFailuresWithinBudgetWaitForRetry(t *testing.T) {
	c := workersCluster(3, func(s *UpgradeSettings) { s.MaxFailedNodes = ptr(2) })
	s := newSim(t, c, v1344, gates)
	s.noRetry = true
	failed := false
	s.fail = func(a Action) bool {
		if failKubeletOf("w0-0")(a) && !failed {
			failed = true
			return true
		}
		return false
	}
	s.run(10_000)
	require.Equal(t, UpgradeRunning, s.u.State)
	require.Empty(t, Decide(s.u, s.now, Open).Actions, "waits for an operator")
	for _, n := range []string{"w0-1", "w0-2"} {
		node, _ := s.u.Node(n)
		require.Equal(t, StateDone, node.State)
	}
	require.NoError(t, s.u.RetryNode("w0-0", s.now))
	s.run(10_000)
	require.Equal(t, UpgradeDone, s.u.State)
}

// TestRollbackProperties: across random pools, concurrencies, minimums,
// failures, budgets and policies, and operators rolling pools back in a
// random order once the upgrade failed — the version rules hold at every
// step (no node outside [From, To]; the control plane never older than a
// kubelet; a control-plane rollback refused while a kubelet runs To), a
// rolling-back pool never has more nodes going back than its concurrency,
// never takes a schedulable node below its minimum, takes nodes back in
// the reverse of the order they started in, and a pool rolled back
// automatically ends with every node at From.
func TestRollbackProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := testCluster(0, 1, 0, rapid.IntRange(1, 5).Draw(rt, "w0"), rapid.IntRange(1, 5).Draw(rt, "w1"))
		for i := 1; i < len(c.Pools); i++ {
			n := len(c.Pools[i].Nodes)
			c.Pools[i].Settings = UpgradeSettings{
				ConcurrentNodes:       rapid.IntRange(1, 3).Draw(rt, "concurrency"),
				MinimumAvailableNodes: rapid.IntRange(0, n-1).Draw(rt, "minAvailable"),
				MaxFailedNodes:        ptr(rapid.IntRange(1, n).Draw(rt, "budget")),
				Rollback:              rapid.SampledFrom([]string{RollbackAuto, RollbackManual}).Draw(rt, "policy"),
			}
		}
		require.NoError(rt, c.Validate())
		s := newSim(rt, c, v1344, Options{StepLayout: StepLayoutGates, ConcurrentWorkerPools: 2, GateTimeout: time.Minute})
		s.noRetry = true
		s.pick = func(n int) int { return rapid.IntRange(0, n-1).Draw(rt, "pick") }
		s.fail = func(a Action) bool {
			return !a.Rollback && a.Pool != "cp" && rapid.IntRange(0, 7).Draw(rt, "fail") == 0
		}
		// back records, per pool, when each node that went back had
		// started forward and when it started back.
		back := map[string][][2]time.Time{}
		started := map[string]time.Time{}
		prev := map[string]NodeTask{}
		s.observe = func() {
			cp, _ := s.u.Node("cp-0")
			down := map[string]int{}
			for _, n := range prev {
				if n.State == StateRunning || n.State == StateFailed {
					down[n.Pool]++
				}
			}
			for _, n := range s.u.Nodes {
				require.False(rt, n.Version.Less(v1336) || v1344.Less(n.Version), "node %s at %s", n.Node, n.Version)
				require.False(rt, cp.Version.Less(n.Version), "kubelet %s newer than the control plane", n.Node)
				if !n.Rollback && n.State != StatePending {
					started[n.Node] = n.StartedAt
				}
				if was := prev[n.Node]; n.Rollback && !was.Rollback {
					back[n.Pool] = append(back[n.Pool], [2]time.Time{started[n.Node], n.StartedAt})
					if was.State == StateDone {
						p, _ := s.u.Pool(n.Pool)
						require.GreaterOrEqual(rt, p.Count-down[n.Pool]-1, p.MinAvailable, "node %s went back below the pool's minimum", n.Node)
					}
				}
				prev[n.Node] = n
			}
			for i := range s.u.Pools {
				if p := &s.u.Pools[i]; p.RollingBack {
					require.LessOrEqual(rt, countState(s.u.PoolNodes(p), StateRunning), p.Concurrency, "pool %s rolling back", p.Name)
				}
			}
		}
		s.run(100_000)
		require.Contains(rt, []UpgradeState{UpgradeDone, UpgradeFailed, UpgradeRunning}, s.u.State, "%s", describe(s.u, s.now))
		if s.u.State == UpgradeRunning {
			// Only failures within a budget may leave it running: every
			// pool is done, or waits with failed nodes for a retry (they
			// hold its slack when nodes are still pending).
			require.Empty(rt, Decide(s.u, s.now, Open).Actions)
			for _, p := range s.u.Pools {
				nodes := s.u.PoolNodes(&p)
				f := countState(nodes, StateFailed)
				require.Zero(rt, countState(nodes, StateRunning))
				require.True(rt, f < max(p.MaxFailedNodes, 1) && (f > 0 || countState(nodes, StateDone) == len(nodes)), "%s", describe(s.u, s.now))
			}
		}
		for _, p := range s.u.Pools {
			if p.RollbackPolicy != RollbackAuto || p.FailReason == "" {
				continue
			}
			st, _ := s.u.Step(PoolStepID(p.Name))
			require.Equal(rt, StateRolledBack, st.State)
			for _, n := range s.u.PoolNodes(&p) {
				require.Equal(rt, v1336, n.Version, "pool %s rolled back, node %s", p.Name, n.Node)
				require.Contains(rt, []State{StateDone, StatePending}, n.State, "node %s", n.Node)
				require.Empty(rt, n.RedGate)
			}
		}
		if s.u.State == UpgradeFailed {
			// An operator rolls pools back in a random order: the control
			// plane is refused while a kubelet runs the new version.
			for _, i := range rapid.Permutation([]int{0, 1, 2}).Draw(rt, "rollbacks") {
				p := &s.u.Pools[i]
				err := s.u.PoolCommand(p.Name, PoolRollback, s.now)
				var ce *CommandError
				if err != nil {
					require.ErrorAs(rt, err, &ce)
					require.Contains(rt, []string{"rollback-skew", "already-rolling-back", "rollback-before-start"}, ce.Rule, "%v", err)
					continue
				}
				s.run(100_000)
				require.Equal(rt, UpgradeFailed, s.u.State, "%s", describe(s.u, s.now))
			}
		}
		for _, p := range s.u.Pools {
			for _, a := range back[p.Name] {
				for _, b := range back[p.Name] {
					// a went back before b: it had started forward no earlier.
					require.False(rt, a[1].Before(b[1]) && a[0].Before(b[0]), "pool %s went back out of order: %v", p.Name, back[p.Name])
				}
			}
		}
	})
}

// TestRollbackOfCancelledPool: an operator cancels a bare-metal pool
// midway; once the upgrade halted cancelled, a rollback takes the nodes it
// upgraded back (the last first) and the upgrade ends cancelled again, not
// failed.
func TestRollbackOfCancelledPool(t *testing.T) {
	c := workersCluster(4, nil)
	s := newSim(t, c, v1344, gates)
	var order []string
	s.observe = func() {
		if n, _ := s.u.Node("w0-1"); n.State == StateDone && !n.Rollback {
			_ = s.u.PoolCommand("w0", PoolCancel, s.now)
		}
		for _, n := range s.u.Nodes {
			if n.Rollback && !slices.Contains(order, n.Node) {
				order = append(order, n.Node)
			}
		}
	}
	s.run(10_000)
	require.Equal(t, UpgradeCancelled, s.u.State)
	checkPoolCommand(t, s.u, "cp", PoolRollback, "rollback-skew")
	require.NoError(t, s.u.PoolCommand("w0", PoolRollback, s.now))
	s.run(10_000)
	require.Equal(t, UpgradeCancelled, s.u.State)
	require.Empty(t, s.u.Reason)
	require.Equal(t, []string{"w0-1", "w0-0"}, order)
	for _, name := range []string{"w0-0", "w0-1", "w0-2", "w0-3"} {
		n, _ := s.u.Node(name)
		require.Equal(t, v1336, n.Version, name)
	}
}

// TestHealthSettingsOnMIGPools: blue/green pools take no failure budget
// and no automatic rollback; a surge pool may roll back automatically,
// and a never policy refuses its rollback command.
func TestHealthSettingsOnMIGPools(t *testing.T) {
	var ve *ValidationError
	for _, s := range []func(*UpgradeSettings){
		func(s *UpgradeSettings) { s.MaxFailedNodes = ptr(1) },
		func(s *UpgradeSettings) { s.Rollback = RollbackAuto },
	} {
		require.ErrorAs(t, migCluster(StrategyBlueGreen, 1, 2, s).Validate(), &ve)
		require.Equal(t, "max-failed-nodes", ve.Rule)
	}
	require.NoError(t, migCluster(StrategySurge, 1, 2, func(s *UpgradeSettings) { s.Rollback = RollbackAuto }).Validate())
	u := NewUpgrade("u", migCluster(StrategySurge, 1, 2, func(s *UpgradeSettings) { s.Rollback = RollbackNever }), v1344, gates, time.Time{})
	p := u.Pools[len(u.Pools)-1]
	checkPoolCommand(t, u, p.Name, PoolRollback, "rollback-never")
	require.Equal(t, NodeGates, p.NodeSteps[len(p.NodeSteps)-1].Kind)
}

// TestPlanCountsGateSoak: a dry run times every node of a pool with gates
// with the longest for: of its gates on top.
func TestPlanCountsGateSoak(t *testing.T) {
	c := workersCluster(2, func(s *UpgradeSettings) {
		s.HealthGates = []HealthGate{{Name: "errors", Expr: "up == 1", For: 3 * time.Minute, Prometheus: "http://p:9090"}}
	})
	c.HealthGates = []HealthGate{{Name: "slo", Expr: "up == 1", For: time.Minute, Prometheus: "http://p:9090"}}
	d := DefaultDurations()
	plan := MakePlan(c, v1344, gates, d, time.Time{})
	for _, s := range plan.Steps {
		if s.Pool == "w0" {
			require.Equal(t, d.Node[RoleWorker]+3*time.Minute, s.Batches[0].End.Sub(s.Batches[0].Start))
		}
		if s.Pool == "cp" {
			require.Equal(t, d.Node[RoleControlPlane]+time.Minute, s.Batches[0].End.Sub(s.Batches[0].Start), "the cluster's gates apply to every pool")
		}
	}
}
