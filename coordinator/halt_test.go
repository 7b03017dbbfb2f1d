package coordinator_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
)

// The must-show of a mixed-version coordinator, through the whole member:
// an old member given entries it cannot read (no gate in the way) stops
// applying at the first of them — no panic, the others go on — and says
// so: /readyz 503 with rule member-halted and "needs molt ≥ X" from the
// entry, molt_raft_halted 1, Halted for the member list. With its binary
// replaced it replays its log and holds the same state as the others.
//
// The old binary plays a release before 0.1.0 (its raftstore Version):
// every entry names 0.1.0 or later in its extensions, which it does not
// read; the first it meets may be the record of members' capabilities
// (0.2.0). raftstore's
// TestMemberThatCannotReadHaltsThenCatchesUpWhenUpgraded plays a binary
// that lacks a command.
func TestOldMemberHaltsThenCatchesUpWhenUpgraded(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 3, ops)
	cl := tc.waitLeader().client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))

	var f *member
	for _, m := range tc.list() {
		if !m.c.IsLeader() {
			f = m
			break
		}
	}
	fDir, fHTTP, fRaft := f.dir, f.addr, f.c.Store().RaftAddr()
	f.stop(false)
	old := startMemberAt(t, f.id, fDir, false, ops, fHTTP, fRaft, nil, func(c *coordinator.Config) { c.Raft.Version = "0.0.9" })
	tc.replace(replaceMember(tc.list(), f, old))

	eventually(t, "the old member halts", func() bool { _, h := old.c.Halted(); return h })
	h, _ := old.c.Halted()
	require.Contains(t, []string{"needs molt ≥ 0.1.0", "needs molt ≥ 0.2.0"}, h.Needs())
	code, prob, _ := raw(t, old, http.MethodGet, "/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "member-halted", prob.Rule)
	require.Contains(t, prob.Detail, h.Needs())
	require.Contains(t, prob.Detail, "replace this member's binary")
	rv := old.c.RaftView()
	require.True(t, rv.Halted, "molt_raft_halted 1")
	require.Equal(t, h.Index, rv.HaltedIndex)
	require.False(t, old.c.IsLeader())
	// The member list says why it cannot keep up: its own, and the
	// leader's, which asks it.
	reasonIn := func(ms []api.Member) string {
		for _, m := range ms {
			if m.ID == f.id {
				return m.Reason
			}
		}
		return ""
	}
	ms, err := old.c.Members()
	require.NoError(t, err)
	require.Equal(t, h.Needs(), reasonIn(ms))
	eventually(t, "the leader's member list says why "+f.id+" cannot keep up", func() bool {
		l := tc.waitLeader()
		l.c.AskMembersNow()
		ms, err := l.c.Members()
		return err == nil && reasonIn(ms) == h.Needs()
	})

	// The others go on without it.
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	applied := tc.waitLeader().c.AppliedIndex()
	require.Less(t, old.c.AppliedIndex(), applied)
	_, halted := old.c.Halted()
	require.True(t, halted)

	// Its binary replaced.
	old.stop(false)
	upgraded := startMemberAt(t, f.id, fDir, false, ops, fHTTP, fRaft, nil)
	tc.replace(replaceMember(tc.list(), old, upgraded))
	eventually(t, "every member holds the same state", func() bool {
		var want string
		for i, m := range tc.alive() {
			if m.c.AppliedIndex() < applied {
				return false
			}
			st, err := m.c.StateWithoutAudit()
			if err != nil {
				return false
			}
			if i == 0 {
				want = st
			} else if st != want {
				return false
			}
		}
		return true
	})
	_, halted = upgraded.c.Halted()
	require.False(t, halted)
	code, prob, _ = raw(t, upgraded, http.MethodGet, "/readyz", "", nil)
	require.Equal(t, http.StatusOK, code, "%v", prob)
}

// A leader shut down as SIGTERM shuts molt-coordinator down (Run's context
// ends, the API server stops, then Close: cmd/molt-coordinator) hands
// leadership over first: its successor asks for votes marked as a
// leadership transfer, in the term it leads, rather than after an
// election timeout.
func TestLeaderShutdownHandsLeadershipOver(t *testing.T) {
	tc := newTestCluster(t, 3, newFakeOps())
	l := tc.waitLeader()
	l.stop(false)
	nl := tc.waitLeader()
	require.NotEqual(t, l.id, nl.id)
	for _, m := range tc.alive() {
		if m == nl {
			continue
		}
		// The successor asks every member at once and leads on the first
		// majority (the old leader's vote and its own): this member's
		// request may still be in flight.
		var transfer bool
		eventually(t, "the new leader's vote request reaches "+m.id, func() bool {
			var term uint64
			term, transfer = m.c.Store().LastVoteRequest()
			return term == nl.c.Store().Stats().Term
		})
		require.True(t, transfer, "by a leadership transfer")
	}
}

// replaceMember returns ms with was replaced by now.
func replaceMember(ms []*member, was, now *member) []*member {
	out := make([]*member, 0, len(ms))
	for _, m := range ms {
		if m == was {
			m = now
		}
		out = append(out, m)
	}
	return out
}
