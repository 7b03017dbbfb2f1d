package maintenance

import "time"

// Stretch is a half-open interval [Start, End) in UTC.
type Stretch struct {
	Start time.Time
	End   time.Time
}

// MaxCalendarSpan bounds the range WindowStretches draws: a window may open
// up to 24 times a day, so a longer range would list thousands of
// stretches.
const MaxCalendarSpan = 92 * 24 * time.Hour

// WindowStretches returns the window's open stretches (overlapping or
// touching occurrences merged) that intersect [from, to), clipped to it,
// in order. Without a window the whole range is one stretch: the policy
// is always open but for its exclusions. The range is cut to
// MaxCalendarSpan. Exclusions are not subtracted: callers draw them over
// the window.
func (c *Compiled) WindowStretches(from, to time.Time) []Stretch {
	from, to = from.UTC(), to.UTC()
	if to.Sub(from) > MaxCalendarSpan {
		to = from.Add(MaxCalendarSpan)
	}
	if !to.After(from) {
		return nil
	}
	if c.window == nil {
		return []Stretch{{from, to}}
	}
	ivs := c.window.stretches(from, to)
	out := make([]Stretch, len(ivs))
	for i, iv := range ivs {
		out[i] = Stretch{iv.start, iv.end}
	}
	return out
}
