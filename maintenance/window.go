package maintenance

import (
	"time"

	"github.com/teambition/rrule-go"
)

// compiledWindow answers window questions from occurrence starts; every
// occurrence lasts dur, so occurrence ends ascend with their starts.
type compiledWindow struct {
	first time.Time
	dur   time.Duration
	rec   *recurrence // nil for a one-off window
}

// cursor walks occurrence starts in ascending order.
type cursor struct {
	next  rrule.Next // nil for a one-off window
	first time.Time  // the one-off occurrence, until consumed
	done  bool
}

func (c *cursor) advance() (time.Time, bool) {
	if c.next != nil {
		return c.next()
	}
	if c.done {
		return time.Time{}, false
	}
	c.done = true
	return c.first, true
}

// from returns a cursor positioned at the first occurrence whose interval
// ends after q; occurrences that ended at or before q are skipped, at most
// one period's worth thanks to re-anchoring.
func (w *compiledWindow) from(q time.Time) (*cursor, time.Time, bool) {
	c := &cursor{first: w.first}
	if w.rec != nil {
		c.next = w.rec.ruleFrom(q.Add(-w.dur)).Iterator()
	}
	for {
		o, ok := c.advance()
		if !ok {
			return c, time.Time{}, false
		}
		if o.Add(w.dur).After(q) {
			return c, o, true
		}
	}
}

// openAt reports whether the window is open at t; if not, next is the start
// of the next occurrence (ok false when there is none).
func (w *compiledWindow) openAt(t time.Time) (open bool, next time.Time, ok bool) {
	_, o, ok := w.from(t)
	if !ok {
		return false, time.Time{}, false
	}
	return !o.After(t), o, true
}

// stretchEnd returns the end of the open stretch that contains t, merging
// overlapping and touching occurrences, capped at limit. ok is false when t
// is outside the window.
func (w *compiledWindow) stretchEnd(t, limit time.Time) (time.Time, bool) {
	c, o, ok := w.from(t)
	if !ok || o.After(t) {
		return time.Time{}, false
	}
	end := o.Add(w.dur)
	for end.Before(limit) {
		n, ok := c.advance()
		if !ok || n.After(end) {
			break
		}
		end = n.Add(w.dur)
	}
	if end.After(limit) {
		end = limit
	}
	return end, true
}

// stretches returns the merged open stretches that intersect [from, to),
// clipped to it, in order.
func (w *compiledWindow) stretches(from, to time.Time) []interval {
	var out []interval
	c, o, ok := w.from(from)
	for ok && o.Before(to) {
		iv := interval{start: maxTime2(o, from), end: minTime2(o.Add(w.dur), to)}
		if n := len(out); n > 0 && !iv.start.After(out[n-1].end) {
			if iv.end.After(out[n-1].end) {
				out[n-1].end = iv.end
			}
		} else {
			out = append(out, iv)
		}
		o, ok = c.advance()
	}
	return out
}

// seriesEnd returns when a finite window (one-off, or with UNTIL) closes
// for good: no occurrence is open at or after it. ok is false for a window
// that recurs forever and for no window at all.
func (w *compiledWindow) seriesEnd() (time.Time, bool) {
	switch {
	case w == nil:
		return time.Time{}, false
	case w.rec == nil:
		return w.first.Add(w.dur), true
	case !w.rec.opts.Until.IsZero():
		// UNTIL bounds occurrence starts; the last one may be earlier,
		// which only makes the window close sooner.
		return w.rec.opts.Until.Add(w.dur), true
	}
	return time.Time{}, false
}
