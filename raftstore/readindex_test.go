package raftstore

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadIndexCoversAcknowledgedWrites: the leader's read index covers a
// write acknowledged before it was asked, also for a follower whose state
// machine is held behind (Config.HoldApply): once the follower has
// applied the index, it holds the write. A follower has no read index.
func TestReadIndexCoversAcknowledgedWrites(t *testing.T) {
	var mu sync.Mutex
	gates := map[string]chan struct{}{} // a member's while it is held
	nodes := newCluster(t, 3, func(c *Config) {
		id := c.NodeID
		c.HoldApply = func(uint64) {
			mu.Lock()
			g := gates[id]
			mu.Unlock()
			if g != nil {
				<-g
			}
		}
	})
	release := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		if g := gates[id]; g != nil {
			close(g)
			delete(gates, id)
		}
	}
	leader := waitLeader(t, nodes)
	held := without(nodes, leader)[0]
	mu.Lock()
	gates[held.cfg.NodeID] = make(chan struct{})
	mu.Unlock()
	t.Cleanup(func() { release(held.cfg.NodeID) })

	put(t, leader.s, "k", "v")
	idx, err := leader.s.ReadIndex(ctx(t))
	require.NoError(t, err)
	require.GreaterOrEqual(t, idx, leader.s.AppliedIndex(), "the read index covers what the leader applied")
	require.Less(t, held.s.AppliedIndex(), idx, "the held follower has not applied the write")
	_, err = held.s.ReadIndex(ctx(t))
	require.True(t, errors.Is(err, ErrNotLeader), "only the leader answers: %v", err)

	release(held.cfg.NodeID)
	require.NoError(t, held.s.WaitForIndex(ctx(t), idx))
	v, ok := held.kv.get("k")
	require.True(t, ok)
	require.Equal(t, "v", v.Value)
}
