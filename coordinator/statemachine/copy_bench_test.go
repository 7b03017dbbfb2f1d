package statemachine

import (
	"fmt"
	"testing"
	"time"

	"github.com/moltproject/molt/phases"
)

// BenchmarkCopyUpgrade15k copies a running upgrade of 15,000 nodes, each
// with the lists a finished bare-metal node carries, as ActiveUpgrades
// does for the leader on every tick.
func BenchmarkCopyUpgrade15k(b *testing.B) {
	now := time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)
	spec := phases.ClusterSpec{Name: "big", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.33.6")}
	spec.Pools = append(spec.Pools, phases.Pool{Name: "cp", Role: phases.RoleControlPlane, Backing: phases.BackingBareMetal})
	for i := range 3 {
		spec.Pools[0].Nodes = append(spec.Pools[0].Nodes, phases.Node{Name: fmt.Sprintf("cp-%d", i)})
	}
	for p := range 15 {
		pool := phases.Pool{Name: fmt.Sprintf("workers-%d", p), Role: phases.RoleWorker, Backing: phases.BackingBareMetal}
		for i := range 1000 {
			pool.Nodes = append(pool.Nodes, phases.Node{Name: fmt.Sprintf("w-%d-%d", p, i)})
		}
		spec.Pools = append(spec.Pools, pool)
	}
	u := phases.NewUpgrade("big-1", &spec, phases.MustParseVersion("1.34.4"), phases.Options{StepLayout: phases.CurrentStepLayout}, now)
	for i := range u.Nodes {
		n := &u.Nodes[i]
		n.Applied = []phases.AppliedOp{{Component: "containerd", ID: "a"}, {Component: "kubelet", ID: "b"}}
		n.Drained = []phases.Workload{{Namespace: "web", Name: "frontend"}}
		n.LeftBehind = []phases.LeftPod{{Namespace: "kube-system", Name: "x", Reason: "terminating"}}
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = copyUpgrade(u)
	}
}
