package maintenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/teambition/rrule-go"
	"pgregory.net/rapid"
)

var recurrenceTemplates = []string{
	"", // one-off
	"FREQ=DAILY",
	"FREQ=DAILY;INTERVAL=3",
	"FREQ=DAILY;BYHOUR=1,13",
	"FREQ=WEEKLY;BYDAY=SA,SU",
	"FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TH;WKST=SU",
	"FREQ=WEEKLY;COUNT=40",
	"FREQ=MONTHLY;BYMONTHDAY=1,15,-1",
	"FREQ=MONTHLY;BYDAY=1SA,-1SU",
	"FREQ=YEARLY;BYMONTH=1,2,3,4,5,6,7,8,9,10,11,12;BYMONTHDAY=10,20",
	"FREQ=DAILY;UNTIL=20260110T000000Z",
	"FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
	"FREQ=MONTHLY;INTERVAL=2",
	"FREQ=WEEKLY;INTERVAL=3;WKST=WE;BYDAY=SU,TU",
	"FREQ=YEARLY;BYWEEKNO=1,2,3,20,40;BYDAY=SA",
	"FREQ=YEARLY;INTERVAL=2;BYMONTH=1;BYDAY=1MO,2TU,-1FR",
}

func minutes(t *rapid.T, label string, lo, hi int) time.Duration {
	return time.Duration(rapid.IntRange(lo, hi).Draw(t, label)) * time.Minute
}

// bruteForce answers Allowed from first principles: occurrences listed by
// rrule-go from the original DTSTART, exclusions checked one by one.
type bruteForce struct {
	occ  []time.Time
	dur  time.Duration
	ex   []Exclusion
	none bool // no window: always open
}

func newBruteForce(t *rapid.T, p Policy, from, to time.Time) bruteForce {
	b := bruteForce{ex: Normalize(p).Exclusions, none: p.Window == nil}
	if w := p.Window; w != nil {
		b.dur = w.End.Sub(w.Start)
		if w.Recurrence == "" {
			b.occ = []time.Time{w.Start}
		} else {
			o, err := rrule.StrToROption(w.Recurrence)
			require.NoError(t, err)
			o.Dtstart = w.Start
			r, err := rrule.NewRRule(*o)
			require.NoError(t, err)
			b.occ = r.Between(from.Add(-b.dur), to, true)
		}
	}
	return b
}

func (b bruteForce) allowed(ch Change, x time.Time) bool {
	for _, e := range b.ex {
		if !x.Before(e.Start) && x.Before(e.End) && e.Scope.Blocks(ch) {
			return false
		}
	}
	if b.none {
		return true
	}
	for _, o := range b.occ {
		if !x.Before(o) && x.Before(o.Add(b.dur)) {
			return true
		}
	}
	return false
}

// drawCase draws a random policy on a minute grid, a query instant and a
// change; the window may start up to ~2 years back to exercise re-anchoring.
func drawCase(t *rapid.T) (Policy, time.Time, Change) {
	scopes := []Scope{ScopeNoUpgrades, ScopeNoMinorUpgrades, ScopeNoMinorOrNodeUpgrades}
	after := t0.Add(minutes(t, "after", 0, 3*24*60))
	var p Policy
	if rapid.IntRange(0, 4).Draw(t, "hasWindow") > 0 {
		start := t0.Add(-minutes(t, "windowAge", -3*24*60, 800*24*60))
		p.Window = &Window{
			Start:      start,
			End:        start.Add(minutes(t, "windowLen", 1, 3*24*60)),
			Recurrence: rapid.SampledFrom(recurrenceTemplates).Draw(t, "recurrence"),
		}
	}
	for i := range rapid.IntRange(0, 5).Draw(t, "exclusions") {
		s := after.Add(minutes(t, "exStart", -2*24*60, 12*24*60))
		p.Exclusions = append(p.Exclusions, Exclusion{
			Name:  string(rune('a' + i)),
			Start: s,
			End:   s.Add(minutes(t, "exLen", 1, 5*24*60)),
			Scope: rapid.SampledFrom(scopes).Draw(t, "scope"),
		})
	}
	return p, after, rapid.SampledFrom(allChanges()).Draw(t, "change")
}

func TestNextOpportunityMatchesMinuteScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, after, ch := drawCase(t)
		limit := after.Add(14 * day)
		c, err := p.Compile()
		require.NoError(t, err)
		b := newBruteForce(t, p, after, limit)
		var want time.Time
		found := false
		for x := after; !x.After(limit); x = x.Add(time.Minute) {
			if b.allowed(ch, x) {
				want, found = x, true
				break
			}
		}
		got, ok := c.nextOpportunity(ch, after, limit)
		require.Equal(t, found, ok, "want %s", want)
		require.Equal(t, want, got)
		if ok {
			require.True(t, c.Allowed(ch, got).Allowed)
		}
	})
}

func TestAllowedMatchesBruteForce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, after, ch := drawCase(t)
		limit := after.Add(14 * day)
		c, err := p.Compile()
		require.NoError(t, err)
		b := newBruteForce(t, p, after, limit)
		for range 50 {
			x := after.Add(minutes(t, "probe", 0, 14*24*60))
			d := c.Allowed(ch, x)
			require.Equal(t, b.allowed(ch, x), d.Allowed, "at %s", x)
			require.Equal(t, d.Allowed, len(d.BlockedBy) == 0)
			require.Equal(t, d.Allowed, d.PauseReason == PauseNone)
		}
	})
}
