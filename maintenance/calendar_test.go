package maintenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestWindowStretchesMatchMinuteScan: a minute lies in one of the returned
// stretches exactly when the window (exclusions ignored) is open then, and
// the stretches are ordered, clipped to the range, and neither overlap nor
// touch.
func TestWindowStretchesMatchMinuteScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, from, _ := drawCase(t)
		p.Exclusions = nil
		to := from.Add(minutes(t, "span", 1, 4*24*60))
		c, err := p.Compile()
		require.NoError(t, err)
		got := c.WindowStretches(from, to)
		for i, s := range got {
			require.True(t, s.End.After(s.Start), "stretch %d is empty", i)
			require.False(t, s.Start.Before(from), "stretch %d starts before the range", i)
			require.False(t, s.End.After(to), "stretch %d ends after the range", i)
			if i > 0 {
				require.True(t, s.Start.After(got[i-1].End), "stretches %d and %d touch or overlap", i-1, i)
			}
		}
		b := newBruteForce(t, p, from, to)
		ch := Change{Target: TargetNodes, Kind: KindPatch}
		for x := from; x.Before(to); x = x.Add(time.Minute) {
			in := false
			for _, s := range got {
				in = in || (!x.Before(s.Start) && x.Before(s.End))
			}
			require.Equal(t, b.allowed(ch, x), in, "at %s", x)
		}
	})
}

func TestWindowStretchesBounds(t *testing.T) {
	from := t0
	always, err := Policy{}.Compile()
	require.NoError(t, err)
	require.Equal(t, []Stretch{{from, from.Add(2 * day)}}, always.WindowStretches(from, from.Add(2*day)), "no window: always open")
	require.Empty(t, always.WindowStretches(from, from), "an empty range has no stretch")
	require.Equal(t, []Stretch{{from, from.Add(MaxCalendarSpan)}}, always.WindowStretches(from, from.Add(400*day)), "cut to MaxCalendarSpan")

	daily, err := Policy{Window: &Window{Start: from.Add(2 * time.Hour), End: from.Add(6 * time.Hour), Recurrence: "FREQ=DAILY"}}.Compile()
	require.NoError(t, err)
	got := daily.WindowStretches(from.Add(3*time.Hour), from.Add(60*day))
	require.Len(t, got, 60)
	require.Equal(t, Stretch{from.Add(3 * time.Hour), from.Add(6 * time.Hour)}, got[0], "clipped at the range's start")
	require.Equal(t, Stretch{from.Add(59*day + 2*time.Hour), from.Add(59*day + 6*time.Hour)}, got[59])
}
