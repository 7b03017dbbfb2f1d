package maintenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// On an hour grid the availability total is linear between grid points, so
// the exact minimum is the minimum over hourly period starts, which a brute
// force can list.
func TestMinAvailabilityMatchesHourScan(t *testing.T) {
	hours := func(t *rapid.T, label string, lo, hi int) time.Duration {
		return time.Duration(rapid.IntRange(lo, hi).Draw(t, label)) * time.Hour
	}
	templates := []string{"", "FREQ=DAILY", "FREQ=DAILY;INTERVAL=2", "FREQ=WEEKLY;BYDAY=SA,SU", "FREQ=WEEKLY;BYDAY=MO,WE,FR", "FREQ=DAILY;BYHOUR=0,6,12", "FREQ=DAILY;UNTIL=20260120T000000Z"}
	rapid.Check(t, func(t *rapid.T) {
		now := t0.Add(hours(t, "now", 0, 48))
		lookahead := hours(t, "lookahead", 0, 10*24)
		var p Policy
		if rapid.Bool().Draw(t, "hasWindow") {
			start := t0.Add(-hours(t, "windowAge", -72, 60*24))
			p.Window = &Window{Start: start, End: start.Add(hours(t, "windowLen", 1, 30)), Recurrence: rapid.SampledFrom(templates).Draw(t, "recurrence")}
		}
		for i := range rapid.IntRange(0, 3).Draw(t, "exclusions") {
			s := now.Add(hours(t, "exStart", -48, 40*24))
			p.Exclusions = append(p.Exclusions, Exclusion{Name: string(rune('a' + i)), Start: s, End: s.Add(hours(t, "exLen", 1, 35*24)), Scope: ScopeNoUpgrades})
		}
		c, err := p.Compile()
		require.NoError(t, err)
		got, _ := c.minAvailability(now, lookahead)

		// The period starts the rule promises to check.
		from := now
		if p.Window != nil && c.window.first.After(from) {
			from = c.window.first
		}
		checked := func(x time.Time) bool {
			if !x.Before(from) && !x.After(from.Add(lookahead)) {
				return true
			}
			for _, e := range c.policy.Exclusions {
				if e.End.After(from) && !x.Before(e.Start.Add(-AvailabilityPeriod)) && !x.Before(from) && !x.After(e.End) {
					return true
				}
			}
			end, ok := c.window.seriesEnd()
			return ok && x.Equal(maxTime2(from, end))
		}
		to := from.Add(lookahead + 2*AvailabilityPeriod + 40*day)
		// Mark every open hour over a range wide enough that edge stretches are
		// not cut short, then keep runs of at least four hours.
		lo := from.Add(-5 * day)
		n := int(to.Add(AvailabilityPeriod+5*day).Sub(lo) / time.Hour)
		b := newBruteForce(t, p, lo, lo.Add(time.Duration(n)*time.Hour))
		open := make([]bool, n)
		mark := func(from, to time.Time, v bool) {
			for h := max(0, int(from.Sub(lo)/time.Hour)); h < n && h < int(to.Sub(lo)/time.Hour); h++ {
				open[h] = v
			}
		}
		if b.none {
			mark(lo, lo.Add(time.Duration(n)*time.Hour), true)
		}
		for _, o := range b.occ {
			mark(o, o.Add(b.dur), true)
		}
		for _, e := range b.ex {
			mark(e.Start, e.End, false)
		}
		usable := make([]int, n+1) // prefix sums of usable hours
		for h := 0; h < n; {
			if !open[h] {
				usable[h+1] = usable[h]
				h++
				continue
			}
			e := h
			for e < n && open[e] {
				e++
			}
			long := e-h >= 4
			for ; h < e; h++ {
				usable[h+1] = usable[h]
				if long {
					usable[h+1]++
				}
			}
		}
		period := int(AvailabilityPeriod / time.Hour)
		want := -1
		for s := int(from.Sub(lo) / time.Hour); s <= int(to.Sub(lo)/time.Hour); s++ {
			if !checked(lo.Add(time.Duration(s) * time.Hour)) {
				continue
			}
			if v := usable[s+period] - usable[s]; want < 0 || v < want {
				want = v
			}
		}
		require.Equal(t, time.Duration(want)*time.Hour, got)
	})
}
