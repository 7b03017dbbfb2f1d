package statemachine

import (
	"time"

	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/maintenance"
)

// Persisted form of a cluster's maintenance policy (see persisted.go:
// append-only).

type policyV1 struct {
	Window     *windowV1     `json:"window,omitempty"`
	Exclusions []exclusionV1 `json:"exclusions,omitempty"`
}

type windowV1 struct {
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	Recurrence string    `json:"recurrence"`
}

type exclusionV1 struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Scope string    `json:"scope,omitempty"`
}

func policyToV1(p maintenance.Policy) policyV1 {
	return policyV1{
		Window: conv.Ptr(p.Window, func(w maintenance.Window) windowV1 {
			return windowV1{Start: w.Start, End: w.End, Recurrence: w.Recurrence}
		}),
		Exclusions: conv.Slice(p.Exclusions, func(e maintenance.Exclusion) exclusionV1 {
			return exclusionV1{Name: e.Name, Start: e.Start, End: e.End, Scope: string(e.Scope)}
		}),
	}
}

func policyFromV1(p policyV1) maintenance.Policy {
	return maintenance.Policy{
		Window: conv.Ptr(p.Window, func(w windowV1) maintenance.Window {
			return maintenance.Window{Start: w.Start, End: w.End, Recurrence: w.Recurrence}
		}),
		Exclusions: conv.Slice(p.Exclusions, func(e exclusionV1) maintenance.Exclusion {
			return maintenance.Exclusion{Name: e.Name, Start: e.Start, End: e.End, Scope: maintenance.Scope(e.Scope)}
		}),
	}
}
