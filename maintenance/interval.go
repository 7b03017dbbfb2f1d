package maintenance

import (
	"slices"
	"time"
)

// interval is the half-open [start, end).
type interval struct {
	start, end time.Time
}

func (iv interval) contains(t time.Time) bool {
	return !t.Before(iv.start) && t.Before(iv.end)
}

// merge sorts intervals and joins overlapping or touching ones; empty
// intervals are dropped. The input is reused.
func merge(ivs []interval) []interval {
	ivs = slices.DeleteFunc(ivs, func(iv interval) bool { return !iv.end.After(iv.start) })
	slices.SortFunc(ivs, func(a, b interval) int { return a.start.Compare(b.start) })
	out := ivs[:0]
	for _, iv := range ivs {
		if n := len(out); n > 0 && !iv.start.After(out[n-1].end) {
			if iv.end.After(out[n-1].end) {
				out[n-1].end = iv.end
			}
			continue
		}
		out = append(out, iv)
	}
	return out
}

// subtract removes the sorted, merged cuts from the sorted, merged base.
func subtract(base, cuts []interval) []interval {
	var out []interval
	j := 0
	for _, b := range base {
		cur := b.start
		for j < len(cuts) && !cuts[j].end.After(cur) {
			j++
		}
		for k := j; k < len(cuts) && cuts[k].start.Before(b.end); k++ {
			if cuts[k].start.After(cur) {
				out = append(out, interval{cur, cuts[k].start})
			}
			if cuts[k].end.After(cur) {
				cur = cuts[k].end
			}
		}
		if cur.Before(b.end) {
			out = append(out, interval{cur, b.end})
		}
	}
	return out
}

func maxTime2(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime2(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
