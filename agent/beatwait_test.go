package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBeatWaitBacksOffAfterFailures: beats that get through are looked
// at every health-check interval; failed ones back off, doubling up to the
// heartbeat interval and jittered, so an unreachable coordinator is asked
// about once an interval per agent, not every 2 s in step.
func TestBeatWaitBacksOffAfterFailures(t *testing.T) {
	check, every := 2*time.Second, 10*time.Second
	most := func(n int64) int64 { return n - 1 }
	least := func(int64) int64 { return 0 }
	require.Equal(t, check, beatWait(0, check, every, least))
	for _, tc := range []struct {
		failures  int
		low, high time.Duration
	}{{1, 2 * time.Second, 4 * time.Second}, {2, 4 * time.Second, 8 * time.Second}, {3, 5 * time.Second, 10 * time.Second}, {40, 5 * time.Second, 10 * time.Second}} {
		require.Equal(t, tc.low, beatWait(tc.failures, check, every, least), "failures %d, least jitter", tc.failures)
		require.Equal(t, tc.high, beatWait(tc.failures, check, every, most), "failures %d, most jitter", tc.failures)
	}
	// Over a minute without the coordinator an agent tries far fewer than
	// the 30 times a fixed 2 s wait made.
	var tries int
	for elapsed, f := time.Duration(0), 0; elapsed < time.Minute; f++ {
		elapsed += beatWait(f, check, every, least)
		tries++
	}
	require.LessOrEqual(t, tries, 15, "even with the shortest jitter every time")
	// An interval shorter than the check caps both.
	require.Equal(t, time.Second, beatWait(0, check, time.Second, least))
	require.Equal(t, time.Second, beatWait(5, check, time.Second, most))
}
