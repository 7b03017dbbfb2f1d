package maintenance

import (
	"fmt"
	"testing"
	"time"
)

// benchPolicy is a weekly Saturday window, created a year before the query,
// with 20 exclusions over the following year. A minor upgrade is blocked by
// all of them; the 12-hour gaps between them never meet a Saturday morning,
// so NextOpportunity visits every gap and every window occurrence it
// reaches before answering, about a year later.
func benchPolicy() Policy {
	p := Policy{Window: &Window{
		Start:      t0.Add(-365*day + 5*day + 2*time.Hour),
		End:        t0.Add(-365*day + 5*day + 10*time.Hour),
		Recurrence: "FREQ=WEEKLY;BYDAY=SA",
	}}
	for i := range MaxExclusions {
		s := t0.Add(time.Duration(i) * 18 * day)
		scope := ScopeNoMinorUpgrades
		if i%7 == 0 {
			scope = ScopeNoUpgrades
		}
		p.Exclusions = append(p.Exclusions, Exclusion{Name: fmt.Sprintf("e%d", i), Start: s, End: s.Add(17*day + 12*time.Hour), Scope: scope})
	}
	return p
}

func BenchmarkNextOpportunityWeekly20Exclusions(b *testing.B) {
	c := mustCompile(b, benchPolicy())
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.NextOpportunity(cpMinor, t0); !ok {
			b.Fatal("no opportunity")
		}
	}
}

func BenchmarkAllowedWeekly20Exclusions(b *testing.B) {
	c := mustCompile(b, benchPolicy())
	b.ReportAllocs()
	for b.Loop() {
		c.Allowed(cpPatch, t0.Add(5*day+3*time.Hour))
	}
}

func BenchmarkCompile(b *testing.B) {
	p := benchPolicy()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Compile(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	p := benchPolicy()
	p.Exclusions = p.Exclusions[:3]
	ctx := ValidationContext{Now: t0, OnReleaseChannel: true}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Validate(ctx)
	}
}

func TestBenchPolicyShape(t *testing.T) {
	c := mustCompile(t, benchPolicy())
	next, ok := c.NextOpportunity(cpMinor, t0)
	if !ok || next.Before(t0.Add(360*day)) {
		t.Fatalf("next = %s, %v; the benchmark should cross about a year", next, ok)
	}
}

// An always-open daily window is the worst case for WindowEnds, which
// merges touching occurrences up to WindowEndsHorizon.
func BenchmarkAllowedAlwaysOpenDaily(b *testing.B) {
	c := mustCompile(b, Policy{Window: &Window{Start: t0.Add(-400 * day), End: t0.Add(-399 * day), Recurrence: "FREQ=DAILY"}})
	b.ReportAllocs()
	for b.Loop() {
		c.Allowed(cpPatch, t0)
	}
}
