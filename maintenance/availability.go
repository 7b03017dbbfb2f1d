package maintenance

import (
	"sort"
	"time"
)

// checkAvailability enforces the availability rule of SPEC §9: in every
// AvailabilityPeriod the window minus the no_upgrades exclusions must leave
// MinAvailability, counting only maximal contiguous stretches of at least
// MinAvailabilityStretch (the part of such a stretch that falls inside the
// period counts in full, even if short). See periodStarts for which
// periods are checked.
func (c *Compiled) checkAvailability(now time.Time) error {
	worst, worstAt := c.minAvailability(now, AvailabilityLookahead)
	if worst < MinAvailability {
		return ruleErr(RuleMaintenanceAvailability,
			"the 32 days from %s leave %s of maintenance availability in stretches of at least %s; at least %s is required",
			worstAt.Format(time.RFC3339), worst, MinAvailabilityStretch, MinAvailability)
	}
	return nil
}

// minAvailability returns the least availability of any checked period and
// that period's start. lookahead is a parameter so tests can compare the
// result with a brute force on a short range.
//
// As a function of the period start the total is continuous and piecewise
// linear; its slope changes only where a period edge meets a stretch edge,
// so evaluating it at those candidates and at the ends of the checked
// ranges finds the exact minimum without scanning.
func (c *Compiled) minAvailability(now time.Time, lookahead time.Duration) (time.Duration, time.Time) {
	starts, cuts := c.periodStarts(now, lookahead)
	// Evaluate a little beyond each range of periods so that clipping at
	// its edges cannot make a long stretch look short, and skip the
	// exclusions themselves so a long exclusion costs nothing.
	var span []interval
	for _, r := range starts {
		span = append(span, interval{r.start.Add(-MinAvailabilityStretch), r.end.Add(AvailabilityPeriod + MinAvailabilityStretch)})
	}
	var usable []interval
	for _, piece := range subtract(merge(span), cuts) {
		open := []interval{piece}
		if c.window != nil {
			open = c.window.stretches(piece.start, piece.end)
		}
		for _, iv := range open {
			if iv.end.Sub(iv.start) >= MinAvailabilityStretch {
				usable = append(usable, iv)
			}
		}
	}
	worst, worstAt := AvailabilityPeriod+1, time.Time{}
	try := func(s time.Time) {
		for _, r := range starts {
			if !s.Before(r.start) && !s.After(r.end) {
				if a := availableIn(usable, s); a < worst {
					worst, worstAt = a, s
				}
				return
			}
		}
	}
	for _, r := range starts {
		try(r.start)
		try(r.end)
	}
	for _, iv := range usable {
		for _, s := range []time.Time{iv.start, iv.end, iv.start.Add(-AvailabilityPeriod), iv.end.Add(-AvailabilityPeriod)} {
			try(s)
		}
	}
	return worst, worstAt
}

// periodStarts returns the closed ranges of period starts to check, merged,
// and the merged no_upgrades exclusions. Checked are every period that
// could be affected by a no_upgrades exclusion that has not ended, the
// periods of the next lookahead (which show the window's own rhythm), and
// the period that begins when a finite window's last occurrence ends. All
// begin no earlier than the validation instant, or the window's first
// start if that is later: before it nothing is expected of the policy.
func (c *Compiled) periodStarts(now time.Time, lookahead time.Duration) (starts, cuts []interval) {
	from := now
	if c.window != nil && c.window.first.After(from) {
		from = c.window.first
	}
	starts = []interval{{from, from.Add(lookahead)}}
	for _, e := range c.policy.Exclusions {
		if e.Scope != ScopeNoUpgrades {
			continue
		}
		// Ended exclusions still cut: one that just ended shortens the
		// stretch that begins at from.
		cuts = append(cuts, interval{e.Start, e.End})
		if e.End.After(from) {
			starts = append(starts, interval{maxTime2(from, e.Start.Add(-AvailabilityPeriod)), e.End})
		}
	}
	if end, ok := c.window.seriesEnd(); ok {
		s := maxTime2(from, end)
		starts = append(starts, interval{s, s})
	}
	return mergeClosed(starts), merge(cuts)
}

// mergeClosed merges closed ranges (single instants included).
func mergeClosed(ivs []interval) []interval {
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].start.Before(ivs[j].start) })
	out := ivs[:0]
	for _, iv := range ivs {
		if n := len(out); n > 0 && !iv.start.After(out[n-1].end) {
			out[n-1].end = maxTime2(out[n-1].end, iv.end)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// availableIn sums the parts of the sorted, disjoint stretches that fall in
// [s, s+AvailabilityPeriod).
func availableIn(stretches []interval, s time.Time) time.Duration {
	e := s.Add(AvailabilityPeriod)
	i := sort.Search(len(stretches), func(i int) bool { return stretches[i].end.After(s) })
	var total time.Duration
	for ; i < len(stretches) && stretches[i].start.Before(e); i++ {
		total += minTime2(stretches[i].end, e).Sub(maxTime2(stretches[i].start, s))
	}
	return total
}
