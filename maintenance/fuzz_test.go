package maintenance

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzPolicyJSON feeds arbitrary API bodies through the whole pipeline: no
// input may panic, and every refusal must be a *RuleError.
//
// The bodies decode straight into Policy, which carries no JSON tags: the
// decoder matches the wire's keys ("window", "start", "scope", …) to its
// fields without regard to case, as it matched the tags they once had, so
// the corpus in testdata/fuzz reaches the same policies. (The wire twin,
// api.MaintenancePolicy, is out of reach: maintenance imports no wire
// package.)
func FuzzPolicyJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"window":{"start":"2026-01-10T02:00:00Z","end":"2026-01-10T08:00:00Z","recurrence":"FREQ=WEEKLY;BYDAY=SA,SU"}}`,
		`{"window":{"start":"2026-01-10T23:00:00+01:00","end":"2026-01-11T05:00:00+01:00","recurrence":"RRULE:FREQ=DAILY"},"exclusions":[{"name":"freeze","start":"2026-02-01T00:00:00Z","end":"2026-02-10T00:00:00Z"}]}`,
		`{"window":{"start":"2026-01-01T00:00:00Z","end":"2026-01-01T04:00:00Z","recurrence":"FREQ=HOURLY"}}`,
		`{"window":{"start":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z","recurrence":"FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"}}`,
		`{"window":{"start":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z","recurrence":"FREQ=MONTHLY;BYDAY=1SA;COUNT=3"}}`,
		`{"exclusions":[{"name":"a","start":"2026-01-01T00:00:00Z","end":"2026-01-31T00:00:00Z","scope":"no_minor_upgrades"},{"name":"b","start":"2026-01-15T00:00:00Z","end":"2026-03-01T00:00:00Z","scope":"no_minor_or_node_upgrades"},{"name":"a","start":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z","scope":"bogus"}]}`,
		`{"exclusions":[{"name":"","start":"0001-01-01T00:00:00Z","end":"9999-01-01T00:00:00Z"}]}`,
		`{"window":{"start":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z","recurrence":"FREQ=DAILY;COUNT=-5;INTERVAL=0"}}`,
	} {
		f.Add([]byte(seed))
	}
	now := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		var p Policy
		if json.Unmarshal(body, &p) != nil {
			return
		}
		n := Normalize(p)
		for _, ctx := range []ValidationContext{{Now: now}, {Now: now, OnReleaseChannel: true, EndOfSupport: now.Add(90 * day)}} {
			verr := n.Validate(ctx)
			aerr := p.Admit(ctx)
			for _, err := range []error{verr, aerr} {
				if err != nil {
					var re *RuleError
					if !errors.As(err, &re) || !errors.Is(err, ErrInvalidPolicy) || re.Rule == "" {
						t.Fatalf("refusal is not a *RuleError: %#v", err)
					}
				}
			}
			if verr != nil && aerr == nil {
				t.Fatalf("Admit accepts what Validate refuses: %v", verr)
			}
		}
		c, err := p.Compile()
		if err != nil {
			var re *RuleError
			if !errors.As(err, &re) {
				t.Fatalf("compile error is not a *RuleError: %#v", err)
			}
			return
		}
		for _, ch := range allChanges() {
			d := c.Allowed(ch, now)
			if d.Allowed != (len(d.BlockedBy) == 0) {
				t.Fatalf("inconsistent decision %+v", d)
			}
			if next, ok := c.NextOpportunity(ch, now); ok {
				if next.Before(now) || !c.Allowed(ch, next).Allowed {
					t.Fatalf("NextOpportunity %s is not allowed", next)
				}
			}
		}
	})
}

// FuzzRecurrence aims at the RRULE path directly, which JSON-level fuzzing
// rarely reaches: any rule, start and duration must compile to a *RuleError
// or answer consistently.
func FuzzRecurrence(f *testing.F) {
	for _, r := range append(recurrenceTemplates, "FREQ=YEARLY;BYWEEKNO=53;BYDAY=MO", "FREQ=MONTHLY;BYSETPOS=-1;BYDAY=MO,TU,WE,TH,FR", "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", "FREQ=WEEKLY;INTERVAL=1000") {
		f.Add(r, int64(-400*24*60), int64(240), int64(3*24*60))
	}
	f.Fuzz(func(t *testing.T, rule string, startMin, durMin, queryMin int64) {
		start := t0.Add(time.Duration(startMin%(200*365*24*60)) * time.Minute)
		p := Policy{Window: &Window{Start: start, End: start.Add(time.Duration(durMin%(400*24*60)) * time.Minute), Recurrence: rule}}
		c, err := p.Compile()
		if err != nil {
			var re *RuleError
			if !errors.As(err, &re) {
				t.Fatalf("compile error is not a *RuleError: %#v", err)
			}
			return
		}
		q := t0.Add(time.Duration(queryMin%(100*365*24*60)) * time.Minute)
		d := c.Allowed(cpPatch, q)
		next, ok := c.NextOpportunity(cpPatch, q)
		if d.Allowed && (!ok || !next.Equal(q)) {
			t.Fatalf("allowed at %s but next = %s, %v", q, next, ok)
		}
		if ok && !c.Allowed(cpPatch, next).Allowed {
			t.Fatalf("next %s is not allowed", next)
		}
	})
}
