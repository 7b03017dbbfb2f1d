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

// BenchmarkPass1000InSequences is BenchmarkPass1000 with the fleet in 10
// rollout sequences of three stages each (target: ≤ 100 ms): a tenth of
// each sequence's families in its first stage by name, the rest by their
// labels, every stage soaking a day, and the clusters' pasts of four done
// upgrades each.
func BenchmarkPass1000InSequences(b *testing.B) {
	f, now := benchFleet(b)
	for i := range f.Clusters {
		c := &f.Clusters[i]
		seq := fmt.Sprintf("seq%d", i/100)
		stage := "prod"
		switch {
		case i%100 < 10:
			stage = "dev"
		case i%100 < 40:
			stage = "staging"
		}
		c.Labels = map[string]string{"sequence": seq, "stage": stage}
		for j := range 4 {
			c.Past = append(c.Past, Upgrade{ID: fmt.Sprintf("%s-%d", c.Name, j), From: v("1.32.1"), To: v("1.32.9"), State: phases.UpgradeDone,
				FinishedAt: now.Add(-time.Duration(400-j*30) * day)})
		}
	}
	for s := range 10 {
		name := fmt.Sprintf("seq%d", s)
		seq := Sequence{Name: name}
		var dev []string
		for i := s * 100; i < s*100+10; i++ {
			dev = append(dev, f.Clusters[i].Name)
		}
		seq.Stages = []Stage{
			{Name: "dev", Clusters: dev, Soak: day},
			{Name: "staging", Selector: map[string]string{"sequence": name, "stage": "staging"}, Soak: day},
			{Name: "prod", Selector: map[string]string{"sequence": name, "stage": "prod"}},
		}
		f.Sequences = append(f.Sequences, seq)
	}
	b.ReportAllocs()
	starts, waiting := 0, 0
	for b.Loop() {
		p := Evaluate(f, now)
		starts, waiting = len(p.Starts()), 0
		for _, d := range p.Decisions {
			if d.Status.State == StateWaitingForStage {
				waiting++
			}
		}
	}
	b.ReportMetric(float64(starts), "starts")
	b.ReportMetric(float64(waiting), "waiting-for-stage")
}
