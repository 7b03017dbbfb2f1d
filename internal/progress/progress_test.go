package progress_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/internal/progress"
)

func newLoops(slack time.Duration) (*progress.Loops, *clock.Manual) {
	c := clock.NewManual(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	return progress.New(c.Now, slack), c
}

// A loop is stalled exactly when it went without progress for longer than
// its bound plus the slack.
func TestStalledAfterBoundPlusSlack(t *testing.T) {
	l, c := newLoops(5 * time.Second)
	l.Watch("beat", 10*time.Second)
	l.Watch("poll", time.Minute)
	require.Empty(t, l.Stalled())

	c.Advance(15 * time.Second)
	require.Empty(t, l.Stalled(), "at bound plus slack the loop is not late yet")
	c.Advance(time.Nanosecond)
	require.Equal(t, []string{"beat"}, l.Stalled())

	l.Beat("beat")
	require.Empty(t, l.Stalled(), "progress makes the loop healthy again")

	c.Advance(time.Minute)
	require.Equal(t, []string{"beat", "poll"}, l.Stalled(), "sorted")
}

// A busy loop is not judged until its next Beat, however long its work
// takes; from that Beat on it is judged again.
func TestBusyExcusesUntilTheNextBeat(t *testing.T) {
	l, c := newLoops(0)
	l.Watch("main", time.Second)
	l.Busy("main")
	c.Advance(time.Hour)
	require.Empty(t, l.Stalled(), "a loop busy with work that has deadlines of its own")

	l.Beat("main")
	c.Advance(time.Second)
	require.Empty(t, l.Stalled())
	c.Advance(time.Nanosecond)
	require.Equal(t, []string{"main"}, l.Stalled(), "judged again after the work")
}

// Watch counts as progress and sets the bound; a forgotten loop, a loop
// never watched and a nil set are never stalled.
func TestWatchForgetAndNil(t *testing.T) {
	l, c := newLoops(0)
	l.Watch("a", time.Second)
	c.Advance(time.Minute)
	l.Watch("a", 2*time.Second)
	c.Advance(2 * time.Second)
	require.Empty(t, l.Stalled())
	c.Advance(time.Nanosecond)
	require.Equal(t, []string{"a"}, l.Stalled())

	l.Forget("a")
	l.Beat("never-watched")
	l.Busy("never-watched")
	c.Advance(time.Hour)
	require.Empty(t, l.Stalled(), "a loop that ended as it should, and one never watched")

	var none *progress.Loops
	none.Watch("x", time.Second)
	none.Beat("x")
	none.Busy("x")
	none.Forget("x")
	require.Empty(t, none.Stalled())
}
