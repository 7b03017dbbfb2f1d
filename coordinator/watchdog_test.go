package coordinator_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/clock"
)

// TestHealthyFollowsTheApplyLoop: a member with nothing to apply is
// healthy however long it stays idle; one whose FSM is stuck in an Apply
// is healthy until that Apply has been seen in progress for longer than
// ApplyTimeout plus the watchdog slack, unhealthy after, and healthy again
// once the apply loop goes on. Time is the member's clock, moved by the
// test; the FSM is stuck by Config.Raft.ApplyHook.
func TestHealthyFollowsTheApplyLoop(t *testing.T) {
	clock := clock.NewManual(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	const applyTimeout, slack = 2 * time.Second, 30 * time.Second
	var wedge atomic.Bool
	entered, unwedge := make(chan struct{}), make(chan struct{})
	m := startMemberAt(t, "m1", t.TempDir(), true, newFakeOps(), "", "127.0.0.1:0", clock, func(cfg *coordinator.Config) {
		cfg.Raft.ApplyTimeout = applyTimeout
		cfg.WatchdogSlack = slack
		cfg.Raft.ApplyHook = func() {
			if wedge.CompareAndSwap(true, false) {
				close(entered)
				<-unwedge
			}
		}
	})

	require.True(t, m.c.Healthy())
	clock.Set(clock.Now().Add(24 * time.Hour))
	require.True(t, m.c.Healthy(), "idle, with nothing to apply, for a day")

	// The next write's Apply never returns until released.
	wedge.Store(true)
	wrote := make(chan error, 1)
	go func() {
		_, err := m.client().Do(context.Background(), http.MethodPut, "/v1/releases/1.34.4", release("1.34.4"), nil)
		wrote <- err
	}()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the write never reached the FSM")
	}
	require.True(t, m.c.Healthy(), "the stuck Apply seen for the first time")
	clock.Set(clock.Now().Add(applyTimeout + slack))
	require.True(t, m.c.Healthy(), "in progress for exactly the bound")
	clock.Set(clock.Now().Add(time.Millisecond))
	require.False(t, m.c.Healthy(), "in progress for longer than the bound")
	require.False(t, m.c.Healthy(), "still")

	close(unwedge)
	<-wrote // answered or timed out, as the real time it waited decides
	eventually(t, "the apply loop going on", m.c.Healthy)
	_, err := m.client().Do(context.Background(), http.MethodGet, "/v1/releases/1.34.4", nil, nil)
	require.NoError(t, err, "the entry was committed and is applied once the loop goes on")
}
