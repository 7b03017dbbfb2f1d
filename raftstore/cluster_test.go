package raftstore

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestClusterFormedByJoin(t *testing.T) {
	nodes := newCluster(t, 3, nil)
	leader := waitLeader(t, nodes)

	v := putAny(t, nodes, "a", "1")
	waitKV(t, nodes, map[string]kvEntry{"a": {"1", v}})

	for _, n := range nodes {
		ms, err := n.s.Members()
		require.NoError(t, err)
		require.Len(t, ms, 3)
		for _, m := range ms {
			require.True(t, m.Voter)
			require.Equal(t, m.ID == leader.cfg.NodeID, m.Leader)
			require.Equal(t, m.ID+".molt.test:8443", m.HTTPAddr)
		}
		if n != leader {
			st := n.s.Stats()
			require.Equal(t, "Follower", st.State)
			require.Equal(t, 2, st.NumPeers)
		}
	}

	t.Run("follower refuses writes and names the leader", func(t *testing.T) {
		for _, f := range without(nodes, leader) {
			_, err := f.s.Apply(ctx(t), putBody{Key: "b", Value: "x"})
			require.ErrorIs(t, err, ErrNotLeader)
			require.ErrorIs(t, f.s.Barrier(ctx(t)), ErrNotLeader)
			require.ErrorIs(t, f.s.Join(ctx(t), "z", "127.0.0.1:1", ""), ErrNotLeader)
			require.ErrorIs(t, f.s.Remove(ctx(t), "z"), ErrNotLeader)
			id, raftAddr, httpAddr := f.s.Leader()
			require.Equal(t, leader.cfg.NodeID, id)
			require.Equal(t, leader.s.RaftAddr(), raftAddr)
			require.Equal(t, leader.cfg.HTTPAddr, httpAddr)
		}
	})

	t.Run("join again is idempotent", func(t *testing.T) {
		f := without(nodes, leader)[0]
		before := leader.s.Stats().LastLogIndex
		require.NoError(t, leader.s.Join(ctx(t), f.cfg.NodeID, f.s.RaftAddr(), f.cfg.HTTPAddr))
		// A barrier is appended by ensureMember, nothing else.
		require.LessOrEqual(t, leader.s.Stats().LastLogIndex, before+1)
		ms, err := leader.s.Members()
		require.NoError(t, err)
		require.Len(t, ms, 3)
	})

	t.Run("join again with a new HTTP address updates it", func(t *testing.T) {
		f := without(nodes, leader)[0]
		require.NoError(t, leader.s.Join(ctx(t), f.cfg.NodeID, f.s.RaftAddr(), "moved:9443"))
		waitFor(t, "new address everywhere", func() bool {
			for _, n := range nodes {
				ms, _ := n.s.Members()
				for _, m := range ms {
					if m.ID == f.cfg.NodeID && m.HTTPAddr != "moved:9443" {
						return false
					}
				}
			}
			return true
		})
	})

	t.Run("a follower reads its own write with WaitForIndex", func(t *testing.T) {
		v := putAny(t, nodes, "c", "3")
		for _, f := range without(nodes, leader) {
			require.NoError(t, f.s.WaitForIndex(ctx(t), v))
			e, ok := f.kv.get("c")
			require.True(t, ok)
			require.Equal(t, v, e.Version)
		}
	})
}

func TestKillLeaderElectsNewLeaderWithAllCommitted(t *testing.T) {
	nodes := newCluster(t, 3, nil)

	want := map[string]kvEntry{}
	for i := range 20 {
		k := fmt.Sprintf("k%02d", i)
		want[k] = kvEntry{Value: "v", Version: putAny(t, nodes, k, "v")}
	}
	leader := waitLeader(t, nodes)
	rest := without(nodes, leader)
	subs := map[*node]<-chan bool{}
	for _, n := range rest {
		subs[n] = n.s.LeaderCh()
	}
	require.NoError(t, leader.s.Kill())

	newLeader := waitLeader(t, rest)
	waitFor(t, "the new leader's LeaderCh says true", func() bool {
		select {
		case v := <-subs[newLeader]:
			return v
		default:
			return false
		}
	})
	require.NotEqual(t, leader.cfg.NodeID, newLeader.cfg.NodeID)
	newLeader = barrierOnLeader(t, rest)
	require.Equal(t, want, newLeader.kv.dump(), "the new leader has every committed entry")

	// The new leader accepts writes; the surviving follower now forwards to it.
	v := putAny(t, rest, "after", "x")
	newLeader = waitLeader(t, rest)
	want["after"] = kvEntry{Value: "x", Version: v}
	waitKV(t, rest, want)
	for _, n := range rest {
		_, _, httpAddr := n.s.Leader()
		require.Equal(t, newLeader.cfg.HTTPAddr, httpAddr)
	}

	// The killed member comes back from disk and catches up.
	leader.open(t)
	waitKV(t, nodes, want)
}

// A leader that closes hands leadership over first: its successor is
// elected by a transfer (its vote request says so), not after an election
// timeout; Kill, the crash, is the contrast.
func TestGracefulCloseHandsOverLeadership(t *testing.T) {
	for _, graceful := range []bool{true, false} {
		t.Run(fmt.Sprintf("graceful=%v", graceful), func(t *testing.T) {
			nodes := newCluster(t, 3, nil)
			v := putAny(t, nodes, "a", "1")
			leader := waitLeader(t, nodes)
			if graceful {
				require.NoError(t, leader.s.Close())
			} else {
				require.NoError(t, leader.s.Kill())
			}
			rest := without(nodes, leader)
			newLeader := waitLeader(t, rest)
			require.NoError(t, newLeader.s.Barrier(ctx(t)))
			require.Equal(t, map[string]kvEntry{"a": {"1", v}}, newLeader.kv.dump())
			voter := without(rest, newLeader)[0]
			// The successor asks every member at once and may lead on the
			// closing leader's vote and its own: the request to the
			// remaining member can still be in flight.
			var transfer bool
			waitFor(t, "the new leader asked the remaining member for its vote in its term", func() bool {
				var term uint64
				term, transfer = voter.s.LastVoteRequest()
				return term == newLeader.s.Stats().Term
			})
			require.Equal(t, graceful, transfer, "the vote request was marked as a leadership transfer")
		})
	}
}

func TestTransferLeadershipKeepsOldLeaderUp(t *testing.T) {
	nodes := newCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	require.NoError(t, leader.s.TransferLeadership(ctx(t)))
	require.False(t, leader.s.IsLeader(), "stepped down when the transfer returns")
	newLeader := waitLeader(t, nodes)
	require.NotEqual(t, leader.cfg.NodeID, newLeader.cfg.NodeID)
	// The old leader is a follower now: it refuses writes and follows.
	err := leader.s.TransferLeadership(ctx(t))
	require.ErrorIs(t, err, ErrNotLeader)
	v := putAny(t, nodes, "a", "1")
	waitKV(t, nodes, map[string]kvEntry{"a": {"1", v}})
}

func TestRemoveMember(t *testing.T) {
	nodes := newCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	gone := without(nodes, leader)[0]

	require.NoError(t, leader.s.Remove(ctx(t), gone.cfg.NodeID))
	require.ErrorIs(t, leader.s.Remove(ctx(t), gone.cfg.NodeID), ErrUnknownMember, "removed: nothing left to remove")
	require.NoError(t, gone.s.Close())
	rest := without(nodes, gone)
	waitFor(t, "two members everywhere", func() bool {
		for _, n := range rest {
			ms, err := n.s.Members()
			if err != nil || len(ms) != 2 {
				return false
			}
		}
		return true
	})
	_, ok := leader.s.fsm.member(gone.cfg.NodeID)
	require.False(t, ok, "the removed member's metadata is forgotten")

	// Two members still commit.
	v := putAny(t, rest, "a", "1")
	waitKV(t, rest, map[string]kvEntry{"a": {"1", v}})
}

func TestLeaderRemovesItself(t *testing.T) {
	nodes := newCluster(t, 3, nil)
	leader := waitLeader(t, nodes)
	require.NoError(t, leader.s.Remove(ctx(t), leader.cfg.NodeID))

	rest := without(nodes, leader)
	newLeader := waitLeader(t, rest)
	require.NotEqual(t, leader.cfg.NodeID, newLeader.cfg.NodeID)
	waitFor(t, "two members, metadata of the old leader gone", func() bool {
		for _, n := range rest {
			ms, err := n.s.Members()
			if err != nil || len(ms) != 2 {
				return false
			}
			if _, ok := n.s.fsm.member(leader.cfg.NodeID); ok {
				return false
			}
		}
		return true
	})
	v := putAny(t, rest, "a", "1")
	waitKV(t, rest, map[string]kvEntry{"a": {"1", v}})
}

func TestRestartAllMembersFromDisk(t *testing.T) {
	nodes := newCluster(t, 3, nil)
	want := map[string]kvEntry{}
	for i := range 10 {
		k := fmt.Sprintf("k%d", i)
		want[k] = kvEntry{Value: "v", Version: putAny(t, nodes, k, "v")}
	}
	waitKV(t, nodes, want)
	for _, n := range nodes {
		require.NoError(t, n.s.Close())
	}

	for _, n := range nodes {
		n.open(t) // n0 keeps Bootstrap=true: it must not bootstrap again
	}
	leader := waitLeader(t, nodes)
	require.NoError(t, leader.s.Barrier(ctx(t)))
	waitKV(t, nodes, want)
	for _, n := range nodes {
		ms, err := n.s.Members()
		require.NoError(t, err)
		require.Len(t, ms, 3)
		for _, m := range ms {
			require.Equal(t, m.ID+".molt.test:8443", m.HTTPAddr)
		}
	}
	v := putAny(t, nodes, "new", "x")
	want["new"] = kvEntry{Value: "x", Version: v}
	waitKV(t, nodes, want)
}

// A member that joins after the log was compacted is brought up to date by
// InstallSnapshot: the machine state and the member metadata both travel in
// the snapshot.
func TestNewMemberCatchesUpFromSnapshot(t *testing.T) {
	// Small segments, so that compaction really removes the early entries
	// (raft-wal deletes whole segments only).
	walSegmentSize = 512
	t.Cleanup(func() { walSegmentSize = 0 })
	nodes := newCluster(t, 3, func(c *Config) { c.TrailingLogs = 1 })
	want := map[string]kvEntry{}
	for i := range 10 {
		k := fmt.Sprintf("k%d", i)
		want[k] = kvEntry{Value: "v", Version: putAny(t, nodes, k, "v")}
	}
	leader := waitLeader(t, nodes)
	require.NoError(t, leader.s.Snapshot())

	late := newNode(t, "n3", false)
	join(t, nodes, late)
	waitKV(t, []*node{late}, want)
	leader = waitLeader(t, append(nodes, late))
	require.Equal(t, int32(1), late.kv.restores.Load(), "caught up through a snapshot, not the log")
	waitFor(t, "the late member knows every HTTP address", func() bool {
		ms, err := late.s.Members()
		if err != nil || len(ms) != 4 {
			return false
		}
		for _, m := range ms {
			if m.HTTPAddr != m.ID+".molt.test:8443" {
				return false
			}
		}
		return true
	})
	_, _, httpAddr := late.s.Leader()
	require.Equal(t, leader.cfg.HTTPAddr, httpAddr)
}
