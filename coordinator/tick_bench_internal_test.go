package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
)

// BenchmarkLeaderTick15k measures one leader tick (plan, act, liveness) of an
// upgrade of a 15,000-node cluster whose agents are all registered and
// beating: the cost every tick pays whether or not anything changed.
// MissingAfter is long so that no agent goes missing: what is measured is
// the bookkeeping, not commits.
func BenchmarkLeaderTick15k(b *testing.B) {
	const n = 15000
	c := soloLeader(b)
	c.cfg.MissingAfter = time.Hour
	ctx := context.Background()
	now := c.cfg.Clock.Now()
	rel := func(v string) api.Release {
		return api.Release{Version: v, EndOfSupport: now.AddDate(1, 0, 0), Channels: []string{"regular"}}
	}
	for _, v := range []string{"1.33.6", "1.34.4"} {
		_, err := c.apply(ctx, statemachine.PutReleaseCmd{Release: rel(v), Now: now})
		require.NoError(b, err)
	}
	spec := phases.ClusterSpec{Name: "big", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.33.6"),
		Pools: []phases.Pool{{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: "cp-0"}}}}}
	w := phases.Pool{Name: "workers", Role: phases.RoleWorker}
	for i := 1; i < n; i++ {
		w.Nodes = append(w.Nodes, phases.Node{Name: fmt.Sprintf("w-%d", i)})
	}
	spec.Pools = append(spec.Pools, w)
	_, err := c.apply(ctx, statemachine.PutClusterCmd{Spec: spec, Now: now})
	require.NoError(b, err)
	var nodes []string
	for _, p := range spec.Pools {
		for _, nd := range p.Nodes {
			nodes = append(nodes, nd.Name)
		}
	}
	// Registered side by side, so that Raft batches the entries.
	var wg sync.WaitGroup
	work := make(chan string)
	for range 64 {
		wg.Go(func() {
			for node := range work {
				if _, err := c.apply(ctx, statemachine.AgentRegisterCmd{Cluster: "big", Node: node, Address: node + ":7443", Now: now}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, node := range nodes {
		work <- node
	}
	close(work)
	wg.Wait()
	require.False(b, b.Failed())
	_, err = c.apply(ctx, statemachine.StartUpgradeCmd{Cluster: "big", To: phases.MustParseVersion("1.34.4"), Now: now})
	require.NoError(b, err)

	tm := newTerm(ctx, 4, nil)
	defer tm.end()
	c.dispatch.serve()
	defer c.dispatch.stop()
	l := &leader{Coordinator: c}
	l.live.reset(now)
	for _, node := range nodes {
		l.live.beat("big", node, now)
	}
	// The first ticks commit the upgrade's first decisions; measured is
	// the steady tick after them.
	for again := true; again; {
		again, _ = l.tick(tm.ctx)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		l.tick(tm.ctx)
	}
}
