package phases

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// makespanCluster is a 1,000-node cluster: one control-plane LB node, 3
// control-plane nodes, 2 load-balancer nodes and 994 workers in 5 pools,
// every pool as wide as the rules allow (20 nodes at once) and the worker
// pools side by side — the parallelism Plan.CriticalPath assumes.
func makespanCluster() *ClusterSpec {
	c := &ClusterSpec{Name: "m", Kind: KindStandalone, Version: MustParseVersion("1.33.6")}
	c.Pools = append(c.Pools,
		Pool{Name: "cplb", Role: RoleControlPlaneLB, Nodes: []Node{{Name: "cplb-0"}}},
		Pool{Name: "cp", Role: RoleControlPlane, Nodes: []Node{{Name: "cp-0"}, {Name: "cp-1"}, {Name: "cp-2"}}},
		Pool{Name: "lb", Role: RoleLoadBalancer, Settings: UpgradeSettings{ConcurrentNodes: 20}, Nodes: []Node{{Name: "lb-0"}, {Name: "lb-1"}}})
	left := 1000 - 6
	for p := 0; p < 5; p++ {
		n := left / (5 - p)
		left -= n
		pool := Pool{Name: fmt.Sprintf("w%d", p), Role: RoleWorker, Settings: UpgradeSettings{ConcurrentNodes: 20}}
		for i := 0; i < n; i++ {
			pool.Nodes = append(pool.Nodes, Node{Name: fmt.Sprintf("w%d-%d", p, i)})
		}
		c.Pools = append(c.Pools, pool)
	}
	return c
}

// event is a work action finishing at a simulated instant.
type event struct {
	at time.Time
	a  Action
}

type events []event

func (e events) Len() int           { return len(e) }
func (e events) Less(i, j int) bool { return e[i].at.Before(e[j].at) }
func (e events) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)        { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// simulateMakespan runs an upgrade of c through Decide and Apply in
// simulated time, as the coordinator's leader does (a tick after every
// change), with agents and cluster steps that take random durations:
// each node's upgrade lasts a log-normal time whose mean is its role's
// DefaultDurations (spread sigma), shared equally by its node steps;
// cluster steps last their default. It returns the makespan and the lower
// bound of these very node times: each pool takes at least its longest
// node and its total over its width, along the order of SPEC §4.
func simulateMakespan(tb testing.TB, c *ClusterSpec, seed uint64, sigma float64) (makespan, realizedBound time.Duration) {
	rng := rand.New(rand.NewPCG(seed, 1))
	dur := DefaultDurations()
	start := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	u := NewUpgrade(UpgradeID(c.Name, MustParseVersion("1.34.4"), 1), c, MustParseVersion("1.34.4"), Options{ConcurrentWorkerPools: 5, StepLayout: CurrentStepLayout}, start)
	nodeTime := map[string]time.Duration{}
	for _, n := range u.Nodes {
		p, _ := u.Pool(n.Pool)
		mean := float64(dur.Node[p.Role])
		// log-normal with the given mean: mu = ln(mean) - σ²/2
		nodeTime[n.Node] = time.Duration(math.Exp(math.Log(mean) - sigma*sigma/2 + sigma*rng.NormFloat64()))
	}
	poolBound := map[Role]time.Duration{}
	for i := range u.Pools {
		p := &u.Pools[i]
		var sum, longest time.Duration
		for _, n := range u.PoolNodes(p) {
			sum += nodeTime[n.Node]
			longest = max(longest, nodeTime[n.Node])
		}
		width := MaxConcurrentNodes
		if p.Role == RoleControlPlane {
			width = 1
		}
		poolBound[p.Role] = max(poolBound[p.Role], longest, sum/time.Duration(width))
	}
	realizedBound = poolBound[RoleControlPlaneLB] + poolBound[RoleControlPlane] +
		max(poolBound[RoleLoadBalancer]+poolBound[RoleWorker], dur.Addons) + dur.Health
	stepTime := func(a Action) time.Duration {
		if a.Node != "" {
			// Bare-metal pools: every node follows the pool's node steps.
			p, _ := u.Pool(a.Pool)
			return nodeTime[a.Node] / time.Duration(max(len(p.NodeSteps), 1))
		}
		s, _ := u.Step(a.Step)
		switch s.Kind {
		case StepAddons:
			return dur.Addons
		case StepLifecycle:
			return dur.Lifecycle
		case StepHealth:
			return dur.Health
		}
		return 0
	}
	now := start
	inFlight := map[string]bool{}
	var q events
	for i := 0; ; i++ {
		if i > 1_000_000 {
			tb.Fatal("the simulated upgrade does not end")
		}
		d := Decide(u, now, Open)
		committed := false
		for _, a := range d.Actions {
			switch {
			case a.Commits():
				if err := u.Apply(a, now); err != nil {
					tb.Fatalf("apply %s: %v", a.ID, err)
				}
				committed = true
			case !inFlight[a.ID]:
				inFlight[a.ID] = true
				heap.Push(&q, event{at: now.Add(stepTime(a)), a: a})
			}
		}
		if u.State == UpgradeDone {
			return now.Sub(start), realizedBound
		}
		if committed {
			continue
		}
		if q.Len() == 0 {
			if d.NextWake.After(now) {
				now = d.NextWake
				continue
			}
			tb.Fatalf("the simulated upgrade is stuck in %s", u.State)
		}
		e := heap.Pop(&q).(event)
		now = e.at
		delete(inFlight, e.a.ID)
		var err error
		switch e.a.Kind {
		case ActRunStep:
			err = u.ApplyStepResult(StepResult{Upgrade: e.a.Upgrade, Step: e.a.Step, Attempt: e.a.Attempt, OK: true, Message: "sim"}, now)
		default:
			err = u.ApplyNodeStepResult(NodeStepResult{Upgrade: e.a.Upgrade, Node: e.a.Node, Cursor: e.a.Cursor, Attempt: e.a.Attempt, OK: true}, now)
		}
		if err != nil {
			tb.Fatalf("result of %s: %v", e.a.ID, err)
		}
	}
}

// BenchmarkMakespan1000 reports how close the engine's schedule of a
// 1,000-node upgrade comes to the plan's critical path, the lower bound
// with every pool at its widest (performance table row P1): the mean of
// ten simulated upgrades with random node times, their ratio to the
// critical path computed from the same mean durations, and the worst
// ratio of the ten. Node times spread log-normally (σ = 0.25) around their
// role's default; ratio-fixed-times is one upgrade whose every node takes
// exactly the default.
func BenchmarkMakespan1000(b *testing.B) {
	c := makespanCluster()
	if c.NodeCount() != 1000 {
		b.Fatalf("cluster has %d nodes", c.NodeCount())
	}
	plan := MakePlan(c, MustParseVersion("1.34.4"), Options{ConcurrentWorkerPools: 5, StepLayout: CurrentStepLayout}, DefaultDurations(), time.Unix(0, 0))
	var sum, sumBound time.Duration
	worst := 0.0
	runs := 0
	for b.Loop() {
		for seed := range uint64(10) {
			m, bound := simulateMakespan(b, c, seed, 0.25)
			sum += m
			sumBound += bound
			worst = max(worst, float64(m)/float64(plan.CriticalPath))
			runs++
		}
	}
	mean := sum / time.Duration(runs)
	b.ReportMetric(mean.Hours(), "makespan-h")
	b.ReportMetric(plan.CriticalPath.Hours(), "critical-path-h")
	b.ReportMetric(float64(mean)/float64(plan.CriticalPath), "ratio")
	b.ReportMetric(worst, "worst-ratio")
	// Against the bound of the simulated node times themselves: what the
	// engine loses, apart from the spread of the node times.
	b.ReportMetric(float64(sum)/float64(sumBound), "ratio-to-realized-bound")
	// Every node taking exactly its mean: the engine's own overhead.
	fixed, _ := simulateMakespan(b, c, 0, 0)
	b.ReportMetric(float64(fixed)/float64(plan.CriticalPath), "ratio-fixed-times")
}

// TestMakespanSimulationEnds keeps the simulation honest: the upgrade
// finishes, never faster than the lower bound allows.
func TestMakespanSimulationEnds(t *testing.T) {
	c := makespanCluster()
	plan := MakePlan(c, MustParseVersion("1.34.4"), Options{ConcurrentWorkerPools: 5, StepLayout: CurrentStepLayout}, DefaultDurations(), time.Unix(0, 0))
	m, bound := simulateMakespan(t, c, 1, 0.25)
	if m < plan.CriticalPath*8/10 || m < bound {
		t.Fatalf("makespan %v is below a lower bound: critical path %v, bound of the simulated times %v", m, plan.CriticalPath, bound)
	}
	t.Logf("makespan %v, critical path %v, ratio %.3f", m, plan.CriticalPath, float64(m)/float64(plan.CriticalPath))
}
