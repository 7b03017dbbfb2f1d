package phases

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestPlanTimeline(t *testing.T) {
	c := testCluster(1, 3, 1, 4, 2)
	c.Pools[3].Settings.ConcurrentNodes = 2 // w0: 4 nodes, 2 at a time
	start := time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)
	d := DefaultDurations()
	p := MakePlan(c, MustParseVersion("1.34.4"), Options{}, d, start)

	byID := map[string]PlannedStep{}
	for _, s := range p.Steps {
		byID[s.ID] = s
	}
	cplb, cp, lb, w0, w1, health := byID["pool/cplb"], byID["pool/cp"], byID["pool/lb"], byID["pool/w0"], byID["pool/w1"], byID["health"]
	require.Equal(t, start, cplb.Start)
	require.Equal(t, start.Add(4*time.Minute), cp.Start)
	require.Len(t, cp.Batches, 3, "control plane one node at a time")
	require.Equal(t, cp.Start.Add(18*time.Minute), cp.End)
	require.Equal(t, cp.End, byID["addons"].Start)
	require.Equal(t, cp.End, lb.Start)
	require.Equal(t, lb.End, w0.Start, "workers after the LB pool")
	require.Len(t, w0.Batches, 2)
	require.Equal(t, []string{"w0-0", "w0-1"}, w0.Batches[0].Nodes)
	require.Equal(t, w0.End, w1.Start, "worker pools one after another by default")
	require.Equal(t, w1.End, health.Start)
	require.Equal(t, health.End, p.End)
	require.Equal(t, p.End.Sub(start), p.Total)
	require.Contains(t, cp.Disruption, "none for the API servers")
	require.Contains(t, cplb.Disruption, "1–2 min")
	require.LessOrEqual(t, p.CriticalPath, p.Total)

	par := MakePlan(c, MustParseVersion("1.34.4"), Options{ConcurrentWorkerPools: 2}, d, start)
	require.Less(t, par.Total, p.Total, "parallel worker pools finish sooner")
}

func TestPlanCriticalPathIsALowerBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		workers := rapid.SliceOfN(rapid.IntRange(1, 40), 0, 4).Draw(rt, "workers")
		c := testCluster(rapid.IntRange(0, 2).Draw(rt, "cplb"), rapid.IntRange(1, 5).Draw(rt, "cp"), rapid.IntRange(0, 3).Draw(rt, "lb"), workers...)
		for i := range c.Pools {
			c.Pools[i].Settings.ConcurrentNodes = rapid.IntRange(0, 20).Draw(rt, "cn")
		}
		p := MakePlan(c, MustParseVersion("1.34.4"), Options{ConcurrentWorkerPools: rapid.IntRange(0, 4).Draw(rt, "wp")}, DefaultDurations(), time.Unix(0, 0))
		if p.CriticalPath > p.Total || p.CriticalPath <= 0 {
			rt.Fatalf("critical path %v, total %v", p.CriticalPath, p.Total)
		}
		nodes := 0
		for _, s := range p.Steps {
			for _, b := range s.Batches {
				nodes += len(b.Nodes)
			}
		}
		if nodes != c.NodeCount() {
			rt.Fatalf("batches hold %d nodes, cluster has %d", nodes, c.NodeCount())
		}
	})
}
