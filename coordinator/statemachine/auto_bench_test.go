package statemachine

import (
	"fmt"
	"testing"
	"time"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
)

// benchFleetMachine is a state of 1,000 clusters in 100 families (an admin
// cluster and nine user clusters), on channel regular at four versions
// behind its target, each with a 12-hour daily window starting at its own
// hour and 20 exclusions (ten ended, ten to come, two of them no_upgrades),
// all stored through the commands that validate them.
func benchFleetMachine(b *testing.B) (*yearSim, time.Time) {
	now := time.Date(2027, 3, 3, 10, 0, 0, 0, time.UTC)
	s := &yearSim{t: &testing.T{}, m: New(), now: now.Add(-24 * time.Hour), clusters: map[string]*yearCluster{}}
	v := phases.MustParseVersion
	for _, r := range []string{"1.32.9", "1.33.4", "1.33.5", "1.34.2", "1.35.2"} {
		if _, err := s.apply(PutReleaseCmd{Release: yearRelease(r, now.AddDate(2, 0, 0)), Now: s.now}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := s.apply(PutChannelCmd{Channel: "regular", DefaultVersion: v("1.35.2"), AutoUpgradeTarget: v("1.35.2"), Now: s.now}); err != nil {
		b.Fatal(err)
	}
	versions := []string{"1.32.9", "1.33.4", "1.33.5", "1.34.2"}
	for i := range 1000 {
		name := fmt.Sprintf("c%04d", i)
		spec := phases.ClusterSpec{Name: name, Kind: phases.KindUser, AdminCluster: fmt.Sprintf("c%04d", i-i%10), Channel: "regular",
			Version: v(versions[i%4]), Pools: []phases.Pool{{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: name + "-cp"}}}}}
		if i%10 == 0 {
			spec.Kind, spec.AdminCluster = phases.KindAdmin, ""
		}
		if _, err := s.apply(PutClusterCmd{Spec: spec, Now: s.now}); err != nil {
			b.Fatal(err)
		}
		start := time.Date(2027, 1, 1, i%24, 0, 0, 0, time.UTC)
		p := maintenance.Policy{Window: &maintenance.Window{Start: start, End: start.Add(12 * time.Hour), Recurrence: "FREQ=DAILY"}}
		for j := range maintenance.MaxExclusions {
			at := now.Add(time.Duration(j*9-90+i%5) * 24 * time.Hour)
			scope := []maintenance.Scope{maintenance.ScopeNoMinorUpgrades, maintenance.ScopeNoMinorOrNodeUpgrades}[j%2]
			if j == 12 || j == 16 {
				scope = maintenance.ScopeNoUpgrades
			}
			p.Exclusions = append(p.Exclusions, maintenance.Exclusion{Name: fmt.Sprintf("e%d", j), Start: at, End: at.Add(4 * 24 * time.Hour), Scope: scope})
		}
		if _, err := s.apply(SetPolicyCmd{Cluster: name, Policy: p, Now: s.now}); err != nil {
			b.Fatalf("policy of %s: %v", name, err)
		}
	}
	return s, now
}

// BenchmarkSchedulerPass1000 is one scheduler pass as the leader runs it
// over 1,000 clusters with windows and 20 exclusions each: the fleet read
// from the state machine (policies compiled once, then cached) and the
// decision (target: ≤ 100 ms). BenchmarkSchedulerFirstPass1000 is the
// first pass of a term or after every policy changed, compiling them all.
func BenchmarkSchedulerPass1000(b *testing.B) {
	s, now := benchFleetMachine(b)
	s.m.SchedulerFleet(schedule.Limits{}) // compile once
	b.ReportAllocs()
	starts := 0
	for b.Loop() {
		starts = len(schedule.Evaluate(s.m.SchedulerFleet(schedule.Limits{}), now).Starts())
	}
	b.ReportMetric(float64(starts), "starts")
}

func BenchmarkSchedulerFirstPass1000(b *testing.B) {
	s, now := benchFleetMachine(b)
	b.ReportAllocs()
	for b.Loop() {
		s.m.policies.m = nil
		schedule.Evaluate(s.m.SchedulerFleet(schedule.Limits{}), now)
	}
}
