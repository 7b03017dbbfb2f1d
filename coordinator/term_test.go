package coordinator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/internal/testlog"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
)

const testDeadline = 60 * time.Second

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, testDeadline, 5*time.Millisecond, "waiting for %s", what)
}

// receive waits for ch's value within a generous deadline.
func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testDeadline):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestTermBoundsConcurrencyAndWaitsForItsWork: a term runs at most its
// limit of work items, one per action ID; what finds no slot is not
// started (a later tick starts it); end cancels the term's context and
// returns only after every item has returned; nothing starts after end.
func TestTermBoundsConcurrencyAndWaitsForItsWork(t *testing.T) {
	var finished atomic.Int32
	tm := newTerm(context.Background(), 2, func() { finished.Add(1) })
	require.Same(t, tm, termOf(tm.ctx))
	require.Nil(t, termOf(context.Background()))

	var returned atomic.Int32
	releaseA := make(chan struct{})
	blockUntilEnd := func(ctx context.Context) { <-ctx.Done(); returned.Add(1) }
	require.True(t, tm.start("a", func(context.Context) { <-releaseA; returned.Add(1) }))
	require.True(t, tm.start("b", blockUntilEnd))
	require.False(t, tm.start("a", blockUntilEnd), "one run per action ID at a time")
	require.False(t, tm.start("c", blockUntilEnd), "no free slot: left to a later tick")
	require.Equal(t, 2, tm.running())

	close(releaseA)
	waitFor(t, "a's slot to free up", func() bool { return finished.Load() == 1 })
	require.True(t, tm.start("c", blockUntilEnd), "a later tick finds the free slot")

	tm.end()
	require.Equal(t, int32(3), returned.Load(), "end returns after every item returned")
	require.Equal(t, 0, tm.running())
	require.False(t, tm.start("d", blockUntilEnd), "nothing starts after the term ended")
	loopRan := false
	tm.goLoop(func(context.Context) { loopRan = true })
	require.False(t, loopRan)
}

// TestDispatcherServesOnlyDuringATerm: outside a term a poll returns at
// once with ErrNotLeader; a poll waiting when the term ends returns at
// once with ErrNotLeader too (it does not wait out its deadline); a tick
// finishing after the end cannot put offers back.
func TestDispatcherServesOnlyDuringATerm(t *testing.T) {
	d := newDispatcher()
	ctx := context.Background()
	_, err := d.poll(ctx, "lab", "n1", time.Hour)
	require.ErrorIs(t, err, raftstore.ErrNotLeader)

	d.serve()
	ops, err := d.poll(ctx, "lab", "n1", 0)
	require.NoError(t, err)
	require.Empty(t, ops)

	errc := make(chan error, 1)
	// startPoll starts a long poll and returns once it waits.
	startPoll := func() {
		go func() { _, err := d.poll(ctx, "lab", "n1", time.Hour); errc <- err }()
		waitFor(t, "the poll to wait", func() bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			_, ok := d.waiters[nodeKey("lab", "n1")]
			return ok
		})
	}
	startPoll()
	d.stop()
	require.ErrorIs(t, receive(t, "the poll to return", errc), raftstore.ErrNotLeader)

	d.setCluster("lab", map[string][]api.Operation{"n1": {{ID: "op"}}})
	d.serve()
	ops, err = d.poll(ctx, "lab", "n1", 0)
	require.NoError(t, err)
	require.Empty(t, ops, "offers set outside a term are not served in the next")

	// A poll that began in one term does not serve the next: a member that
	// lost and regained leadership makes its pollers ask again.
	startPoll()
	d.stop()
	d.serve()
	require.ErrorIs(t, receive(t, "the poll to return", errc), raftstore.ErrNotLeader)
}

func TestWakeDelay(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		next     time.Time
		interval time.Duration
		want     time.Duration
	}{
		{"no wake time: the tick interval", time.Time{}, time.Second, time.Second},
		{"wake before the tick", now.Add(200 * time.Millisecond), time.Second, 200 * time.Millisecond},
		{"wake after the tick", now.Add(time.Hour), time.Second, time.Second},
		{"long interval, wake in 10 s", now.Add(10 * time.Second), time.Hour, 10 * time.Second},
		{"wake due already: no spin", now.Add(-time.Second), time.Second, minWake},
		{"interval below the floor", now, time.Millisecond, time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, wakeDelay(now, tc.next, tc.interval))
		})
	}
	early := now.Add(time.Minute)
	require.Equal(t, early, earliestWake([]tickPlan{
		{cluster: "a"},
		{cluster: "b", decision: phases.Decision{NextWake: now.Add(time.Hour)}},
		{cluster: "c", decision: phases.Decision{NextWake: early}},
	}))
	require.True(t, earliestWake([]tickPlan{{cluster: "a"}}).IsZero())
}

// soloLeader opens a one-member coordinator on loopback and waits until it
// leads. Run is not started: the test drives the leader itself.
func soloLeader(t testing.TB) *Coordinator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Raft.NodeID = "solo"
	cfg.Raft.RaftAddr = "127.0.0.1:0"
	cfg.Raft.HTTPAddr = "127.0.0.1:1"
	cfg.Raft.DataDir = t.TempDir()
	cfg.Raft.Bootstrap = true
	cfg.Raft.HeartbeatTimeout = 500 * time.Millisecond
	cfg.Raft.ElectionTimeout = 500 * time.Millisecond
	cfg.Raft.LeaderLeaseTimeout = 250 * time.Millisecond
	cfg.Raft.CommitTimeout = 5 * time.Millisecond
	cfg.Logger = testlog.New(t)
	c, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	waitFor(t, "leadership", c.IsLeader)
	require.NoError(t, c.store.Barrier(context.Background()))
	return c
}

// TestTickCountsOnlyAppliedActions: a decision the FSM refuses entirely as
// stale (made on state that has moved on) changed nothing, so tick must
// not report it as progress — the leader loop would decide again at once,
// forever.
func TestTickCountsOnlyAppliedActions(t *testing.T) {
	c := soloLeader(t)
	ctx := context.Background()
	now := c.cfg.Clock.Now()
	rel := func(v string) api.Release {
		return api.Release{Version: v, EndOfSupport: now.AddDate(1, 0, 0), Channels: []string{"regular"}}
	}
	_, err := c.apply(ctx, statemachine.PutReleaseCmd{Release: rel("1.33.6"), Now: now})
	require.NoError(t, err)
	_, err = c.apply(ctx, statemachine.PutReleaseCmd{Release: rel("1.34.4"), Now: now})
	require.NoError(t, err)
	spec := phases.ClusterSpec{Name: "lab", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.33.6"),
		Pools: []phases.Pool{{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: "cp-1"}}}}}
	_, err = c.apply(ctx, statemachine.PutClusterCmd{Spec: spec, Now: now})
	require.NoError(t, err)
	_, err = c.apply(ctx, statemachine.StartUpgradeCmd{Cluster: "lab", To: phases.MustParseVersion("1.34.4"), Now: now})
	require.NoError(t, err)

	tm := newTerm(ctx, 4, nil)
	defer tm.end()
	c.dispatch.serve()
	defer c.dispatch.stop()
	l := &leader{Coordinator: c}
	plans := l.plan(now)
	require.Len(t, plans, 1)
	require.NotEmpty(t, plans[0].decision.Actions)
	for _, a := range plans[0].decision.Actions {
		require.True(t, a.Commits(), "the first decision only commits: %s", a.ID)
	}
	require.True(t, l.act(tm.ctx, now, plans), "the first commit applies")
	before := c.AppliedIndex()
	require.False(t, l.act(tm.ctx, now, plans), "the same decision again is stale: no progress")
	require.Greater(t, c.AppliedIndex(), before, "it was committed, and refused")

	again, sleep := l.tick(tm.ctx)
	require.True(t, again, "a fresh decision on the new state applies")
	require.Positive(t, sleep)
}

// TestCloseWithoutRunAndRunAfterClose: Close is safe when Run never ran,
// and Run after Close returns at once.
func TestCloseWithoutRunAndRunAfterClose(t *testing.T) {
	c := soloLeader(t)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "twice")
	err := c.Run(context.Background())
	require.True(t, errors.Is(err, raftstore.ErrClosed), "%v", err)
}
