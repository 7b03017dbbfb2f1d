package maintenance

import (
	"strings"
	"time"
)

// Window is the cluster's one maintenance window: its first occurrence and
// an optional recurrence. Automatic upgrades run only while an occurrence is
// open, [occurrence, occurrence+End-Start).
type Window struct {
	// Start is the first occurrence's start and the RRULE DTSTART. Any
	// offset is accepted on input; Normalize stores UTC, whole seconds.
	Start time.Time
	// End is the first occurrence's end; End-Start is every occurrence's
	// duration, so an occurrence may cross midnight.
	End time.Time
	// Recurrence is an RFC 5545 RRULE such as "FREQ=WEEKLY;BYDAY=SA,SU",
	// with or without the "RRULE:" prefix. Empty means a one-off window.
	Recurrence string
}

// Exclusion is a one-off interval [Start, End) during which the changes its
// Scope covers are blocked, whatever the window says.
type Exclusion struct {
	// Name identifies the exclusion; it is reported in Decision.BlockedBy.
	Name  string
	Start time.Time
	End   time.Time
	// Scope says what is blocked; empty means ScopeNoUpgrades.
	Scope Scope
}

// Policy is a cluster's maintenance policy. The zero Policy has no window and
// no exclusions: automatic upgrades may run at any time.
type Policy struct {
	// Window, when nil, means always open.
	Window     *Window
	Exclusions []Exclusion
}

// Normalize returns p in its stored form: every instant in UTC, window
// instants truncated to whole seconds (RRULE has second precision), the
// recurrence without its "RRULE:" prefix, and empty scopes made explicit.
// It never fails; Validate judges the result. p is not modified.
func Normalize(p Policy) Policy {
	var out Policy
	if p.Window != nil {
		w := *p.Window
		w.Start = w.Start.UTC().Truncate(time.Second)
		w.End = w.End.UTC().Truncate(time.Second)
		w.Recurrence = normalizeRecurrence(w.Recurrence)
		out.Window = &w
	}
	if len(p.Exclusions) > 0 {
		out.Exclusions = make([]Exclusion, len(p.Exclusions))
		for i, e := range p.Exclusions {
			e.Name = strings.TrimSpace(e.Name)
			e.Start = e.Start.UTC()
			e.End = e.End.UTC()
			if e.Scope == "" {
				e.Scope = ScopeNoUpgrades
			}
			out.Exclusions[i] = e
		}
	}
	return out
}

// normalizeRecurrence strips blanks and the optional "RRULE:" prefix, which
// RFC 5545 allows but which carries no meaning here.
func normalizeRecurrence(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= len("RRULE:") && strings.EqualFold(s[:len("RRULE:")], "RRULE:") {
		s = strings.TrimSpace(s[len("RRULE:"):])
	}
	return s
}
