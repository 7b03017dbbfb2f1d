package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/clock"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func TestManualFiresWhatIsDueOnly(t *testing.T) {
	c := clock.NewManual(t0)
	after := c.After(time.Minute)
	var fired []string
	c.AfterFunc(30*time.Second, func() { fired = append(fired, "30s") })
	stop := c.AfterFunc(2*time.Minute, func() { fired = append(fired, "2m") })
	require.Equal(t, 3, c.Waiters())

	c.Advance(59 * time.Second)
	require.Equal(t, []string{"30s"}, fired)
	select {
	case <-after:
		t.Fatal("After fired before its time")
	default:
	}

	c.Advance(time.Second)
	require.Equal(t, t0.Add(time.Minute), <-after)
	require.True(t, stop(), "stop before the call prevents it")
	require.False(t, stop(), "a second stop prevents nothing")
	c.Set(t0.Add(time.Hour))
	require.Equal(t, []string{"30s"}, fired)
	require.Zero(t, c.Waiters())
	require.Equal(t, t0.Add(time.Hour), c.Now())
}

func TestManualStopAfterTheCall(t *testing.T) {
	c := clock.NewManual(t0)
	stop := c.AfterFunc(time.Second, func() {})
	c.Advance(time.Second)
	require.False(t, stop())
}

func TestManualCallbackMayUseTheClock(t *testing.T) {
	c := clock.NewManual(t0)
	var at time.Time
	c.AfterFunc(time.Second, func() { at = c.Now() })
	c.Advance(time.Second)
	require.Equal(t, t0.Add(time.Second), at)
}

func TestInstantMovesItselfOnWaits(t *testing.T) {
	c := clock.NewInstant(t0)
	for range 3 {
		<-c.After(10 * time.Second)
	}
	require.Equal(t, t0.Add(30*time.Second), c.Now())
	done := make(chan struct{})
	c.AfterFunc(time.Minute, func() { close(done) })
	<-done
	require.Equal(t, t0.Add(90*time.Second), c.Now())
}

func TestManualConcurrentUse(t *testing.T) {
	c := clock.NewManual(t0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(2)
		go func() { defer wg.Done(); <-c.After(time.Second) }()
		go func() { defer wg.Done(); c.Now(); c.Waiters() }()
	}
	// Every waiter registers before the clock moves past its time.
	require.Eventually(t, func() bool { return c.Waiters() == 8 }, 30*time.Second, time.Millisecond)
	c.Advance(time.Second)
	wg.Wait()
}
