package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// wedger wedges one loop of an agent through Config.LoopHook: the next
// iteration of the loop named by wedge blocks until release.
type wedger struct {
	mu      sync.Mutex
	loop    string
	release chan struct{}
	entered chan string
}

func newWedger() *wedger { return &wedger{entered: make(chan string, 1)} }

func (w *wedger) hook(ctx context.Context, loop string) {
	w.mu.Lock()
	if w.loop != loop {
		w.mu.Unlock()
		return
	}
	w.loop = ""
	release := w.release
	w.mu.Unlock()
	w.entered <- loop
	select {
	case <-release:
	case <-ctx.Done():
	}
}

// wedge wedges loop at its next iteration and waits until it is wedged;
// the returned function lets it go on.
func (w *wedger) wedge(t *testing.T, loop string) (release func()) {
	t.Helper()
	ch := make(chan struct{})
	w.mu.Lock()
	w.loop, w.release = loop, ch
	w.mu.Unlock()
	select {
	case got := <-w.entered:
		require.Equal(t, loop, got)
	case <-time.After(30 * time.Second):
		t.Fatalf("loop %s never reached its next iteration", loop)
	}
	return func() { close(ch) }
}

// TestHealthyJudgesEachLoop: an agent is healthy while its loops make
// progress; a slow operation does not make it unhealthy (the main loop is
// busy, the heartbeat loop goes on); a wedged heartbeat loop or main loop
// does, once it went without progress for its bound plus the slack. Time
// is the agent's clock, moved by the test.
func TestHealthyJudgesEachLoop(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	clock := newSkewClock(t)
	coord.SetClock(clock.Now)
	cfg := h.cfg
	cfg.Clock = clock
	cfg.WatchdogSlack = 15 * time.Second
	w := newWedger()
	cfg.LoopHook = w.hook
	atStep, hold := make(chan struct{}), make(chan struct{})
	cfg.Hooks = HookFunc(func(ctx context.Context, opID, step string) error {
		if opID == "slow" && step == StepStarted {
			close(atStep)
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
		return nil
	})
	a, err := New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = a.Close() })

	require.Eventually(t, func() bool { return len(coord.Heartbeats()) > 0 }, 30*time.Second, 5*time.Millisecond)
	require.True(t, a.Healthy())

	// A slow operation: held at its first step for longer than the main
	// loop's bound plus the slack. The main loop is busy with it; the
	// heartbeat loop keeps beating at the moved clock.
	url, sum := h.serve("kubelet-v1.34.0", kubeletScript("v1.34.0", false))
	coord.enqueue(upgradeOp("slow", url, sum, "v1.34.0"))
	<-atStep
	clock.Advance(a.mainBound() + cfg.WatchdogSlack + time.Minute)
	require.Eventually(t, a.Healthy, 30*time.Second, 5*time.Millisecond, "a slow operation is not a wedged loop")
	close(hold)
	require.Equal(t, api.OpSucceeded, coord.waitResult(t, "slow").State)

	// A wedged heartbeat loop: not late at its bound plus the slack, stalled
	// after; the main loop, polling, is not.
	release := w.wedge(t, LoopHeartbeat)
	require.True(t, a.Healthy(), "just wedged")
	clock.Advance(a.heartbeatBound() + cfg.WatchdogSlack + time.Second)
	require.Eventually(t, func() bool {
		s := a.loops.Stalled()
		return len(s) == 1 && s[0] == LoopHeartbeat
	}, 30*time.Second, 5*time.Millisecond, "the wedged heartbeat loop alone is stalled")
	require.False(t, a.Healthy())
	release()
	require.Eventually(t, a.Healthy, 30*time.Second, 5*time.Millisecond, "healthy again once the loop goes on")

	// A wedged main loop, likewise.
	release = w.wedge(t, LoopMain)
	clock.Advance(a.mainBound() + cfg.WatchdogSlack + time.Second)
	require.Eventually(t, func() bool {
		s := a.loops.Stalled()
		return len(s) == 1 && s[0] == LoopMain
	}, 30*time.Second, 5*time.Millisecond, "the wedged main loop alone is stalled")
	require.False(t, a.Healthy())
	release()
	require.Eventually(t, a.Healthy, 30*time.Second, 5*time.Millisecond)
}
