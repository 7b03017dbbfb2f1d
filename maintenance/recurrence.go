package maintenance

import (
	"strings"
	"time"

	"github.com/teambition/rrule-go"
)

// recurrence is a window's parsed RRULE. rrule-go always iterates from
// DTSTART, which would make every query cost O(occurrences since the window
// was created); so the options keep rrule-go's implicit defaults pinned, and
// ruleFrom re-anchors DTSTART at the start of a period near the query, which
// yields exactly the same occurrences from there on.
type recurrence struct {
	// opts has Dtstart = window start, COUNT turned into UNTIL and every
	// default that rrule-go derives from DTSTART made explicit.
	opts rrule.ROption
}

// maxMonthlyNth bounds BYDAY ordinals (such as 2SA) that count inside a
// month: no month has a sixth Saturday, and rrule-go indexes out of range
// on larger ordinals instead of ignoring them.
const maxMonthlyNth = 5

// parseRecurrence parses a normalised RRULE for a window starting at start.
// Errors are *RuleError.
func parseRecurrence(s string, start time.Time) (rec *recurrence, err error) {
	defer func() {
		// rrule-go is not hardened against every odd rule; a panic while
		// probing one is a refusal of that rule, not a crash of the leader.
		if r := recover(); r != nil {
			rec, err = nil, ruleErr(RuleWindowRecurrenceInvalid, "recurrence %q cannot be evaluated: %v", s, r)
		}
	}()
	if strings.ContainsAny(s, "\r\n") || strings.Contains(strings.ToUpper(s), "DTSTART") {
		return nil, ruleErr(RuleWindowRecurrenceInvalid,
			"recurrence must be a single RRULE without DTSTART; the window start is DTSTART")
	}
	o, err := rrule.StrToROption(s)
	if err != nil {
		return nil, ruleErr(RuleWindowRecurrenceInvalid, "recurrence %q: %v", s, err)
	}
	if err := checkOptions(s, o); err != nil {
		return nil, err
	}
	o.Dtstart = start
	r, err := rrule.NewRRule(*o)
	if err != nil {
		return nil, ruleErr(RuleWindowRecurrenceInvalid, "recurrence %q: %v", s, err)
	}
	// Options holds the defaults buildRRule derived (BYDAY for WEEKLY,
	// BYMONTHDAY for MONTHLY, ...) except the time of day, pinned here.
	opts := r.Options
	if len(opts.Byhour) == 0 {
		opts.Byhour = []int{start.Hour()}
	}
	if len(opts.Byminute) == 0 {
		opts.Byminute = []int{start.Minute()}
	}
	if len(opts.Bysecond) == 0 {
		opts.Bysecond = []int{start.Second()}
	}
	if !matchesEver(opts) {
		return nil, ruleErr(RuleWindowRecurrenceInvalid, "recurrence %q never matches a date", s)
	}
	if opts.Count > 0 {
		// COUNT is relative to DTSTART and would forbid re-anchoring; the
		// last occurrence as UNTIL describes the same set.
		all := r.All()
		if len(all) == 0 {
			return nil, ruleErr(RuleWindowRecurrenceInvalid, "recurrence %q yields no occurrence", s)
		}
		opts.Count = 0
		opts.Until = all[len(all)-1]
	} else if r.After(start, true).IsZero() {
		return nil, ruleErr(RuleWindowRecurrenceInvalid, "recurrence %q yields no occurrence (UNTIL before the start?)", s)
	}
	return &recurrence{opts: opts}, nil
}

// checkOptions refuses what the window model does not need and what
// rrule-go cannot evaluate safely or quickly.
func checkOptions(s string, o *rrule.ROption) error {
	if o.Freq > rrule.DAILY {
		return ruleErr(RuleWindowFrequencyTooHigh,
			"recurrence %q: FREQ=%s; the finest allowed is DAILY", s, o.Freq)
	}
	if n := max(len(o.Byhour), 1) * max(len(o.Byminute), 1) * max(len(o.Bysecond), 1); n > MaxStartsPerDay {
		// BYMINUTE/BYSECOND lists are HOURLY/MINUTELY in disguise, and
		// every query would pay for thousands of starts a day.
		return ruleErr(RuleWindowFrequencyTooHigh,
			"recurrence %q: %d start times a day; at most %d", s, n, MaxStartsPerDay)
	}
	if len(o.Byeaster) > 0 {
		// Easter does not follow the 400-year Gregorian cycle matchesEver
		// relies on, and no maintenance rhythm needs it.
		return ruleErr(RuleWindowRecurrenceInvalid, "recurrence %q: BYEASTER is not supported", s)
	}
	if o.Interval > MaxRecurrenceInterval {
		// rrule-go overflows its day and month counters on huge
		// intervals; no maintenance rhythm needs more than this.
		return ruleErr(RuleWindowRecurrenceInvalid,
			"recurrence %q: INTERVAL above %d", s, MaxRecurrenceInterval)
	}
	if o.Freq == rrule.MONTHLY || o.Freq == rrule.YEARLY && len(o.Bymonth) > 0 {
		for _, wd := range o.Byweekday {
			if n := wd.N(); n > maxMonthlyNth || n < -maxMonthlyNth {
				return ruleErr(RuleWindowRecurrenceInvalid,
					"recurrence %q: BYDAY ordinal %d; within a month it must be between -%d and %d",
					s, n, maxMonthlyNth, maxMonthlyNth)
			}
		}
	}
	if o.Count > MaxRecurrenceCount {
		return ruleErr(RuleWindowRecurrenceInvalid,
			"recurrence %q: COUNT above %d; use UNTIL", s, MaxRecurrenceCount)
	}
	if !o.Until.IsZero() && (o.Until.Before(minTime) || !o.Until.Before(maxTime)) {
		return ruleErr(RuleWindowRecurrenceInvalid, "recurrence %q: UNTIL out of range", s)
	}
	return nil
}

// gregorianCycleYears is the period of the Gregorian calendar: 146097 days,
// a whole number of weeks, so dates and weekdays repeat exactly.
const gregorianCycleYears = 400

// matchesEver reports whether the rule, ignoring COUNT and UNTIL, matches
// any instant at all. rrule-go gives up on a rule that never matches (FEB 30)
// only at year 9999, which for a daily rule is millions of iterations; the
// calendar repeats every 400 years and the rule's INTERVAL every 400×INTERVAL
// years, so probing one such cycle just before year 9999 gives the same
// answer at a bounded cost.
func matchesEver(opts rrule.ROption) bool {
	opts.Count, opts.Until = 0, time.Time{}
	n := max(opts.Interval, 1)
	cycle := gregorianCycleYears * n
	if k := (rrule.MAXYEAR - 1 - cycle - opts.Dtstart.Year()) / cycle; k > 0 {
		opts.Dtstart = opts.Dtstart.AddDate(k*cycle, 0, 0)
	}
	r, err := rrule.NewRRule(opts)
	return err == nil && !r.After(opts.Dtstart, true).IsZero()
}

// checkRecurrenceNumbers refuses a COUNT or INTERVAL that is not a whole
// number of at least 1, as RFC 5545 writes them (1*DIGIT, no sign).
// Policy.Admit checks it; parseRecurrence does not, so policies stored
// before the rule compile as they did.
func checkRecurrenceNumbers(s string) error {
	for _, part := range strings.Split(s, ";") {
		key, value, ok := strings.Cut(part, "=")
		if !ok || (key != "COUNT" && key != "INTERVAL") {
			continue // parseRecurrence judges the rest
		}
		digits := value != "" && strings.Trim(value, "0123456789") == ""
		if !digits || strings.Trim(value, "0") == "" {
			return ruleErr(RuleWindowRecurrenceInvalid, "recurrence %q: %s=%s; when given it is a whole number of at least 1", s, key, value)
		}
	}
	return nil
}
