package schedule

import (
	"fmt"
	"testing"
	"time"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// benchFleet is 1,000 clusters in 100 families (an admin cluster and nine
// user clusters each), spread over four versions behind a channel target,
// each with a weekly window on its own weekday and hour and 20 exclusions
// of every scope over the year around now: what one scheduler pass of a
// large fleet evaluates.
func benchFleet(b *testing.B) (*Fleet, time.Time) {
	now := time.Date(2027, 3, 3, 10, 0, 0, 0, time.UTC)
	cat := catalog("1.35.2", "1.32.9", "1.33.4", "1.33.5", "1.34.2", "1.35.2")
	cat.Channels[ChannelRegular] = Channel{Name: ChannelRegular, Default: v("1.35.2"), Target: v("1.35.2")}
	cat.EndOfSupport[32] = now.Add(90 * day)
	versions := []string{"1.32.9", "1.33.4", "1.33.5", "1.34.2"}
	days := []string{"MO", "TU", "WE", "TH", "FR", "SA", "SU"}
	scopes := []maintenance.Scope{maintenance.ScopeNoUpgrades, maintenance.ScopeNoMinorUpgrades, maintenance.ScopeNoMinorOrNodeUpgrades}
	f := &Fleet{Catalog: cat}
	for i := range 1000 {
		start := time.Date(2027, 1, 4+i%7, i%24, 0, 0, 0, time.UTC)
		p := maintenance.Policy{Window: &maintenance.Window{Start: start, End: start.Add(12 * time.Hour),
			Recurrence: "FREQ=WEEKLY;BYDAY=" + days[start.Weekday()%7]}}
		for j := range maintenance.MaxExclusions {
			s := now.Add(time.Duration(j*18-180+i%5) * day)
			p.Exclusions = append(p.Exclusions, maintenance.Exclusion{Name: fmt.Sprintf("e%d", j), Start: s, End: s.Add(5 * day), Scope: scopes[(i+j)%3]})
		}
		cp, err := p.Compile()
		if err != nil {
			b.Fatal(err)
		}
		c := Cluster{Name: fmt.Sprintf("c%04d", i), Kind: phases.KindUser, Admin: fmt.Sprintf("c%04d", i-i%10),
			Channel: ChannelRegular, Current: v(versions[i%4]), Policy: cp}
		if i%10 == 0 {
			c.Kind, c.Admin = phases.KindAdmin, ""
		}
		if i%50 == 7 {
			c.Upgrade = &Upgrade{ID: c.Name + "-u", From: c.Current, To: v("1.35.2"), State: phases.UpgradeRunning, Automatic: true, PauseReason: "MAINTENANCE_WINDOW"}
		}
		f.Clusters = append(f.Clusters, c)
	}
	return f, now
}

// BenchmarkPass1000 is one scheduler pass over 1,000 clusters with
// windows and 20 exclusions each (target: ≤ 100 ms).
func BenchmarkPass1000(b *testing.B) {
	f, now := benchFleet(b)
	b.ReportAllocs()
	starts := 0
	for b.Loop() {
		starts = len(Evaluate(f, now).Starts())
	}
	b.ReportMetric(float64(starts), "starts")
}
