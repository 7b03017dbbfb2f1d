package phases

import (
	"fmt"
	"testing"
	"time"
)

// bigCluster is the benchmark fleet of the issue: 15,000 nodes, 3
// control-plane and 2 LB nodes, worker pools over 3 zones.
func bigCluster() *ClusterSpec {
	c := &ClusterSpec{Name: "big", Kind: KindStandalone, Version: MustParseVersion("1.33.6")}
	c.Pools = append(c.Pools, Pool{Name: "cp", Role: RoleControlPlane, Nodes: []Node{{Name: "cp-0"}, {Name: "cp-1"}, {Name: "cp-2"}}})
	c.Pools = append(c.Pools, Pool{Name: "lb", Role: RoleLoadBalancer, Nodes: []Node{{Name: "lb-0"}, {Name: "lb-1"}}})
	left := 15000 - 5
	for z := 0; z < 3; z++ {
		for pool := 0; pool < 5; pool++ {
			n := left / (15 - (z*5 + pool))
			left -= n
			p := Pool{Name: fmt.Sprintf("w-z%d-%d", z, pool), Role: RoleWorker, Settings: UpgradeSettings{ConcurrentNodes: 20}}
			for i := 0; i < n; i++ {
				p.Nodes = append(p.Nodes, Node{Name: fmt.Sprintf("w-z%d-%d-%d", z, pool, i), Zone: fmt.Sprintf("z%d", z)})
			}
			c.Pools = append(c.Pools, p)
		}
	}
	return c
}

func BenchmarkPlan15k(b *testing.B) {
	c := bigCluster()
	if c.NodeCount() != 15000 {
		b.Fatalf("cluster has %d nodes", c.NodeCount())
	}
	to := MustParseVersion("1.34.4")
	start := time.Unix(0, 0)
	b.ReportAllocs()
	for b.Loop() {
		MakePlan(c, to, Options{ConcurrentWorkerPools: 3}, DefaultDurations(), start)
	}
}

// BenchmarkTick15k measures one Decide in the middle of a worker pool with
// 20 nodes in flight, the common tick of a big upgrade.
func BenchmarkTick15k(b *testing.B) {
	c := bigCluster()
	u := NewUpgrade("big-1", c, MustParseVersion("1.34.4"), Options{ConcurrentWorkerPools: 3}, time.Unix(0, 0))
	now := time.Unix(10, 0)
	// Finish everything before the worker pools, then half of each worker pool.
	for i := range u.Steps {
		s := &u.Steps[i]
		if s.Kind == StepPool && s.Role == RoleWorker || s.Kind == StepHealth {
			continue
		}
		s.State = StateDone
	}
	for i := range u.Nodes {
		n := &u.Nodes[i]
		p, _ := u.Pool(n.Pool)
		if p.Role != RoleWorker || i%2 == 0 {
			n.State, n.Version, n.Cursor = StateDone, u.To, len(p.NodeSteps)
		}
	}
	for i := 0; i < 3; i++ {
		d := Decide(u, now, Open)
		for _, a := range d.Actions {
			if a.Commits() {
				if err := u.Apply(a, now); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	d := Decide(u, now, Open)
	if len(d.Actions) < 20 {
		b.Fatalf("expected a busy tick, got %d actions", len(d.Actions))
	}
	b.ReportAllocs()
	for b.Loop() {
		Decide(u, now, Open)
	}
}

// bigMIGCluster is bigCluster with half its worker pools backed by
// instance groups (one group per zone), blue/green and surge alternating.
func bigMIGCluster() *ClusterSpec {
	c := bigCluster()
	c.Cloud = &CloudSpec{Provider: CloudGCE, Project: "bench"}
	one, two := 1, 2
	for i := range c.Pools {
		p := &c.Pools[i]
		if p.Role != RoleWorker || i%2 == 0 {
			continue
		}
		p.Backing, p.Settings = BackingMIG, UpgradeSettings{}
		zones := map[string]bool{}
		for _, n := range p.Nodes {
			if !zones[n.Zone] {
				zones[n.Zone] = true
				p.Groups = append(p.Groups, InstanceGroup{Zone: n.Zone, Name: p.Name + "-" + n.Zone})
			}
		}
		if i%4 == 1 {
			p.Settings = UpgradeSettings{Strategy: StrategyBlueGreen, BlueGreen: &BlueGreenSettings{BatchNodeCount: ptr(50), BatchSoak: time.Minute}}
		} else {
			p.Settings = UpgradeSettings{MaxSurge: &two, MaxUnavailable: &one}
		}
	}
	return c
}

func BenchmarkPlan15kMIG(b *testing.B) {
	c := bigMIGCluster()
	if err := c.Validate(); err != nil {
		b.Fatal(err)
	}
	to := MustParseVersion("1.34.4")
	start := time.Unix(0, 0)
	b.ReportAllocs()
	for b.Loop() {
		MakePlan(c, to, Options{ConcurrentWorkerPools: 3, StepLayout: CurrentStepLayout}, DefaultDurations(), start)
	}
}

// BenchmarkTick15kMIG measures one Decide with every worker pool running:
// bare-metal and surge pools half done with nodes in flight, blue/green
// pools draining a batch.
func BenchmarkTick15kMIG(b *testing.B) {
	c := bigMIGCluster()
	u := NewUpgrade("big-1", c, MustParseVersion("1.34.4"), Options{ConcurrentWorkerPools: 15, StepLayout: CurrentStepLayout}, time.Unix(0, 0))
	now := time.Unix(10, 0)
	for i := range u.Steps {
		s := &u.Steps[i]
		switch {
		case s.Kind == StepPool && s.Role == RoleWorker:
			s.State, s.StartedAt = StateRunning, now
		case s.Kind != StepHealth:
			s.State = StateDone
		}
	}
	for i := range u.Pools {
		p := &u.Pools[i]
		if p.Role != RoleWorker {
			continue
		}
		if bg := p.BlueGreen; bg != nil {
			bg.enter(PhaseDrainingBlue, now)
			bg.Batch = 3
		}
		for j := range u.PoolNodes(p) {
			n := &u.PoolNodes(p)[j]
			switch {
			case p.BlueGreen != nil && j < 3*50:
				n.State, n.Cursor = StateDone, 2
			case p.BlueGreen != nil:
				n.State, n.Cursor = StatePending, 1
			case j%2 == 0:
				n.State, n.Version, n.Cursor = StateDone, u.To, len(p.NodeSteps)
				if p.Strategy == StrategySurge {
					n.Current = ReplacementName(p.GroupOf(n), u.ID, n.Node)
				}
			}
		}
	}
	for i := 0; i < 3; i++ {
		d := Decide(u, now, Open)
		for _, a := range d.Actions {
			if a.Commits() {
				if err := u.Apply(a, now); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	d := Decide(u, now, Open)
	if len(d.Actions) < 20 {
		b.Fatalf("expected a busy tick, got %d actions", len(d.Actions))
	}
	b.ReportAllocs()
	for b.Loop() {
		Decide(u, now, Open)
	}
}
