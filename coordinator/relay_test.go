package coordinator_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/coordinator/httpapi"
	"github.com/moltproject/molt/internal/clock"
)

// beatCounter counts how heartbeats reach a member's coordinator: on
// their own (an agent's beat at the leader, or one a follower forwarded)
// or relayed by a follower in a batch.
type beatCounter struct {
	httpapi.AgentService
	httpapi.HeartbeatRelay
	direct, relayed atomic.Int64
}

func (s *beatCounter) Heartbeat(ctx context.Context, h api.AgentHealth) error {
	s.direct.Add(1)
	return s.AgentService.Heartbeat(ctx, h)
}

func (s *beatCounter) RelayedHeartbeats(ctx context.Context, beats []coordinator.RelayedBeat) ([]error, error) {
	s.relayed.Add(int64(len(beats)))
	return s.HeartbeatRelay.RelayedHeartbeats(ctx, beats)
}

// countBeats makes every member started from now on count its beats.
func countBeats(t *testing.T) map[string]*beatCounter {
	var mu sync.Mutex
	counters := map[string]*beatCounter{}
	wrapService = func(id string, s httpapi.Services) httpapi.Services {
		mu.Lock()
		defer mu.Unlock()
		counters[id] = &beatCounter{AgentService: s.Agents, HeartbeatRelay: s.Relay}
		s.Agents, s.Relay = counters[id], counters[id]
		return s
	}
	t.Cleanup(func() { wrapService = nil })
	return counters
}

// agentAt reads agent node's record and last beat as member m shows it.
func agentAt(t *testing.T, m *member, node string) api.AgentStatus {
	t.Helper()
	a, ok := findAgent(t, m, node)
	if !ok {
		t.Fatalf("no agent %s at %s", node, m.id)
	}
	return a
}

// findAgent is agentAt for a member that may not have applied the agent's
// registration yet (a follower's replica): ok is false then.
func findAgent(t *testing.T, m *member, node string) (api.AgentStatus, bool) {
	t.Helper()
	var c api.Cluster
	_, err := m.client().Do(context.Background(), http.MethodGet, "/v1/clusters/lab", nil, &c)
	require.NoError(t, err)
	for _, a := range c.Status.Agents {
		if a.Node == node {
			return a, true
		}
	}
	return api.AgentStatus{}, false
}

// caughtUp waits until follower has applied what the leader has.
func caughtUp(t *testing.T, leader, follower *member) {
	t.Helper()
	idx := leader.c.Store().AppliedIndex()
	eventually(t, "the follower caught up", func() bool { return follower.c.Store().AppliedIndex() >= idx })
}

func healthBeat(node string, healthy bool) api.AgentHealth {
	return api.AgentHealth{Cluster: "lab", Node: node, Kubelet: api.ComponentHealth{Healthy: healthy, Version: "v1.33.6"},
		Containerd: api.ComponentHealth{Healthy: true, Version: "1.7.0"}}
}

// TestBeatsAtAFollower: a beat that changes nothing reaches the leader
// relayed, and is known to the leader by the time the follower answers;
// a beat that changes the agent's record is forwarded on its own and
// committed by then — the same answers a beat at the leader gets.
func TestBeatsAtAFollower(t *testing.T) {
	counters := countBeats(t)
	tc := newTestCluster(t, 3, newFakeOps())
	leader := tc.waitLeader()
	registerLab(t, leader.client())
	var follower *member
	for _, m := range tc.list() {
		if m != leader {
			follower = m
			break
		}
	}
	ctx := context.Background()
	ag, err := enrollAgent(ctx, leader.client(), leader.addr, "lab", "worker-1")
	require.NoError(t, err)
	caughtUp(t, leader, follower)
	cl := ag.client(follower.addr)
	_, err = cl.Register(ctx, api.RegisterRequest{Cluster: "lab", Node: "worker-1"})
	require.NoError(t, err)
	lc := counters[leader.id]

	// The first beat reports health: a change, committed before the answer.
	require.NoError(t, cl.Heartbeat(ctx, healthBeat("worker-1", true)))
	require.Equal(t, int64(1), lc.direct.Load(), "a change goes to the leader on its own")
	require.True(t, agentAt(t, leader, "worker-1").Healthy)
	eventually(t, "the follower's replica shows the health", func() bool {
		a, ok := findAgent(t, follower, "worker-1")
		return ok && a.Healthy
	})

	for i := range 3 {
		before := time.Now()
		require.NoError(t, cl.Heartbeat(ctx, healthBeat("worker-1", true)))
		require.Equal(t, int64(1), lc.direct.Load(), "nothing changed: relayed, not forwarded")
		require.Equal(t, int64(i+1), lc.relayed.Load())
		seen := agentAt(t, leader, "worker-1").LastSeen
		require.False(t, seen.Before(before), "the leader knows the beat by the time the follower answers it (%v < %v)", seen, before)
	}

	// Unhealthy is a change: forwarded, and committed by the answer.
	require.NoError(t, cl.Heartbeat(ctx, healthBeat("worker-1", false)))
	require.Equal(t, int64(2), lc.direct.Load())
	require.False(t, agentAt(t, leader, "worker-1").Healthy)

	// A beat for another node is refused at the follower; one of an agent
	// never registered gets the leader's answer.
	err = cl.Heartbeat(ctx, healthBeat("worker-2", true))
	require.Error(t, err)
	var p *api.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusForbidden, p.Status)
	ag2, err := enrollAgent(ctx, leader.client(), leader.addr, "lab", "worker-2")
	require.NoError(t, err)
	caughtUp(t, leader, follower)
	err = ag2.client(follower.addr).Heartbeat(ctx, healthBeat("worker-2", true))
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusNotFound, p.Status)
}

// TestRelayedBeatsKeepAgentsAlive: an agent that beats only at a
// follower is judged by its relayed beats exactly as by direct ones: not
// missing while it beats within MissingAfter, missing when it stops, and
// back (committed by the time the follower answers) when it beats again.
// One fake clock drives every member; a registered agent that never beats
// shows when a sweep has judged the clock's new time.
func TestRelayedBeatsKeepAgentsAlive(t *testing.T) {
	clock := clock.NewManual(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	tc := newTestCluster(t, 3, newFakeOps(), func(c *coordinator.Config) { c.Clock = clock })
	leader := tc.waitLeader()
	registerLab(t, leader.client())
	var follower *member
	for _, m := range tc.list() {
		if m != leader {
			follower = m
			break
		}
	}
	ctx := context.Background()
	agents := map[string]*client.Client{}
	for _, node := range []string{"worker-1", "worker-2"} {
		ag, err := enrollAgent(ctx, leader.client(), leader.addr, "lab", node)
		require.NoError(t, err)
		caughtUp(t, leader, follower)
		agents[node] = ag.client(follower.addr)
		// Registering is idempotent; the follower forwards it to a leader
		// that a loaded machine may be electing.
		err = whileNoLeader(t, "registration of "+node, func() error {
			_, err := agents[node].Register(ctx, api.RegisterRequest{Cluster: "lab", Node: node})
			return err
		})
		require.NoError(t, err)
	}
	beat := func() {
		t.Helper()
		require.NoError(t, agents["worker-1"].Heartbeat(ctx, healthBeat("worker-1", true)))
	}
	beat() // reports health: committed
	eventually(t, "the follower's replica shows the health", func() bool {
		a, ok := findAgent(t, follower, "worker-1")
		return ok && a.Healthy
	})
	start := clock.Now()
	missing := coordinator.DefaultConfig().MissingAfter

	clock.Set(start.Add(missing - time.Second))
	beat()
	// worker-2, silent since it registered, is declared missing by a sweep
	// at the new time; worker-1 beat a second ago, relayed.
	clock.Set(start.Add(2*missing - 2*time.Second))
	eventually(t, "the silent agent declared missing", func() bool { return agentAt(t, leader, "worker-2").Missing })
	require.False(t, agentAt(t, leader, "worker-1").Missing, "an agent beating at a follower is alive")

	clock.Set(start.Add(3 * missing))
	eventually(t, "the agent that stopped beating declared missing", func() bool { return agentAt(t, leader, "worker-1").Missing })
	eventually(t, "the follower's replica shows it missing", func() bool {
		a, ok := findAgent(t, follower, "worker-1")
		return ok && a.Missing
	})
	beat()
	require.False(t, agentAt(t, leader, "worker-1").Missing, "back, committed by the time the follower answered")
}

// TestSilentAgentsMissingInOneEntry: the agents that stopped beating by
// one sweep are declared missing in one entry (AgentsMissing), not one
// each: after a leader change every agent the new leader has not heard
// from is due at once, and one commit each took thousands of serial
// commits at fleet size.
func TestSilentAgentsMissingInOneEntry(t *testing.T) {
	clock := clock.NewManual(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	tc := newTestCluster(t, 1, newFakeOps(), func(c *coordinator.Config) { c.Clock = clock })
	leader := tc.waitLeader()
	registerLab(t, leader.client())
	ctx := context.Background()
	nodes := []string{"cp-1", "cp-2", "cp-3", "worker-1", "worker-2"}
	for _, node := range nodes {
		ag, err := enrollAgent(ctx, leader.client(), leader.addr, "lab", node)
		require.NoError(t, err)
		_, err = ag.client(leader.addr).Register(ctx, api.RegisterRequest{Cluster: "lab", Node: node})
		require.NoError(t, err)
	}
	idx := leader.c.Store().AppliedIndex()
	clock.Set(clock.Now().Add(2 * coordinator.DefaultConfig().MissingAfter))
	eventually(t, "every silent agent declared missing", func() bool {
		for _, node := range nodes {
			if !agentAt(t, leader, node).Missing {
				return false
			}
		}
		return true
	})
	require.Equal(t, idx+1, leader.c.Store().AppliedIndex(), "one entry for the five")
}
