package maintenance

import (
	"time"

	"github.com/teambition/rrule-go"
)

// ruleFrom returns a fresh rule (rrule-go's RRule is not safe for concurrent
// iteration) whose occurrences at or after some anchor ≤ q are exactly the
// original's.
func (rc *recurrence) ruleFrom(q time.Time) *rrule.RRule {
	opts := rc.opts
	if a, ok := rc.anchor(q); ok {
		opts.Dtstart = a
	}
	r, err := rrule.NewRRule(opts)
	if err != nil {
		// Unreachable: opts passed NewRRule in parseRecurrence and an
		// anchor changes nothing NewRRule checks.
		panic("maintenance: re-anchored rule rejected: " + err.Error())
	}
	return r
}

// anchor returns the start of the latest iteration period (day, week from
// WKST, month or year, stepping by INTERVAL from DTSTART's period) that
// begins after DTSTART and not after q. rrule-go generates whole periods
// and only drops instants before DTSTART, so a rule started at a period
// boundary after the original DTSTART yields the same later occurrences.
func (rc *recurrence) anchor(q time.Time) (time.Time, bool) {
	start := rc.opts.Dtstart
	if !q.After(start) {
		return time.Time{}, false
	}
	n := rc.opts.Interval
	if n < 1 {
		n = 1
	}
	day0 := time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, time.UTC)
	var a time.Time
	switch rc.opts.Freq {
	case rrule.DAILY:
		k := daysBetween(day0, q) / int64(n)
		a = day0.AddDate(0, 0, int(k)*n)
	case rrule.WEEKLY:
		pyWeekday := (int(start.Weekday()) + 6) % 7 // rrule-go counts from Monday
		back := (pyWeekday - rc.opts.Wkst.Day() + 7) % 7
		week0 := day0.AddDate(0, 0, -back)
		k := daysBetween(week0, q) / int64(7*n)
		a = week0.AddDate(0, 0, int(k)*7*n)
	case rrule.MONTHLY:
		months := (q.Year()*12 + int(q.Month())) - (start.Year()*12 + int(start.Month()))
		a = time.Date(start.Year(), start.Month()+time.Month(months/n*n), 1, 0, 0, 0, 0, time.UTC)
	default: // YEARLY
		years := q.Year() - start.Year()
		a = time.Date(start.Year()+years/n*n, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if !a.After(start) {
		return time.Time{}, false
	}
	return a, true
}

// daysBetween counts whole days from a to b in seconds arithmetic, which
// cannot overflow where time.Duration could.
func daysBetween(a, b time.Time) int64 {
	return (b.Unix() - a.Unix()) / 86400
}
