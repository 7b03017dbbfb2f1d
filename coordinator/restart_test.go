package coordinator_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
)

// TestRestartAllFromDiskKeepsState stops every member (after a snapshot,
// so restore runs too), starts them again from their data directories on
// the same addresses, and checks that clusters, releases and the running
// upgrade all came back, and that a write through a follower still works.
func TestRestartAllFromDiskKeepsState(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 3, ops)
	cl := tc.waitLeader().client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	put(t, cl, "/v1/clusters/lab", clusterSpec("lab", "1.33.6"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startAgents(ctx, tc, "lab", nodeNames(clusterSpec("lab", "1.33.6")), true)
	waitAgents(t, tc, "lab", 7)
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	// Agents answer only preflight checks: the upgrade stops at the first
	// agent operation.
	eventually(t, "first node at an agent operation", func() bool {
		u, err := tc.leader().c.Upgrade("lab")
		return err == nil && u.Nodes[0].Cursor == 3 // static pods: needs an agent
	})
	// Every member applies what the leader has before its snapshot: a
	// restarted follower serves its snapshot until the new leader tells it
	// what is committed. The state to keep is read only then: read
	// before, it came from cl's member, which under load may have lost
	// the lead and trail the others.
	leader := tc.waitLeader()
	applied := leader.c.AppliedIndex()
	eventually(t, "every member caught up", func() bool {
		for _, m := range tc.list() {
			if m.c.AppliedIndex() < applied {
				return false
			}
		}
		return true
	})
	before := snapshot(t, cl)
	for _, m := range tc.list() {
		require.NoError(t, m.c.Store().Snapshot())
	}
	// The followers stop first, the leader last. A leader's graceful
	// stop hands leadership to a member still up
	// (TestLeaderShutdownHandsLeadershipOver): stopped in list order,
	// leadership went m1 → m2 → m3 while the cluster stopped, each
	// transient leader starting a term that can write after before was
	// read, and leaving entries no quorum committed.
	type addrs struct{ id, dir, http, raft string }
	var saved []addrs
	var followers, leaders []*member
	for _, m := range tc.list() {
		if m.c.IsLeader() {
			leaders = append(leaders, m)
		} else {
			followers = append(followers, m)
		}
	}
	for _, m := range append(followers, leaders...) {
		saved = append(saved, addrs{m.id, m.dir, m.addr, m.c.Store().RaftAddr()})
		m.stop(false)
	}
	var restarted []*member
	for _, a := range saved {
		restarted = append(restarted, startMemberAt(t, a.id, a.dir, false, ops, a.http, a.raft, nil))
	}
	tc.replace(restarted)
	leader = tc.waitLeader()
	var follower *member
	for _, m := range tc.list() {
		if m != leader {
			follower = m
		}
	}
	eventually(t, "state restored on a follower", func() bool {
		var cs []api.Cluster
		_, err := follower.client().Do(ctx, http.MethodGet, "/v1/clusters", nil, &cs)
		return err == nil && len(cs) == 1
	})
	after := snapshot(t, follower.client())
	require.JSONEq(t, before, after)
	u, err := leader.c.Upgrade("lab")
	require.NoError(t, err)
	require.Equal(t, phases.UpgradeRunning, u.State)
	require.Equal(t, "lab-1.34.4-1", u.ID)

	// A write sent to a follower is forwarded and succeeds, once the
	// follower knows the leader (right after the restart an election may
	// still be settling: 503 no-leader until then).
	eventually(t, "a write through a follower", func() bool {
		_, err := follower.client().Do(ctx, http.MethodPut, "/v1/releases/1.34.5", release("1.34.5"), nil)
		return err == nil
	})
	// Committed, so every member applies it. Not read from leader alone:
	// the election may have settled on another member since waitLeader,
	// and a follower applies what is committed a moment after the leader.
	eventually(t, "the release applied on every member", func() bool {
		for _, m := range tc.list() {
			if rel, err := m.c.Release("1.34.5"); err != nil || rel.Version != "1.34.5" {
				return false
			}
		}
		return true
	})
}
