package phases

import (
	"slices"
	"time"
)

// Availability says when gated work may start: for an automatic upgrade,
// its cluster's maintenance window and exclusions. The planner asks it
// before every step and batch it predicts, as Decide asks its Gate.
type Availability interface {
	// NextStart returns the earliest instant at or after at when new work
	// on target may start; false when there is none in sight.
	NextStart(target Target, at time.Time) (time.Time, bool)
}

// PlannedWait is a stretch of the plan spent outside the window (or
// inside an exclusion) before a step or batch may start.
type PlannedWait struct {
	Start, End time.Time
	// Step is the step whose start (or batch) waits.
	Step   string
	Target Target
}

// InWindows returns the plan with its timeline laid onto the times a waits
// for: a step, and each batch of nodes of a pool step, starts only when a
// allows work on its target, and once started runs to its end (an upgrade
// pauses at safe points, between nodes and steps, SPEC §9). Waiting delays
// everything after it: the plan's steps are shifted in the order they were
// predicted to start. Plan.Waits lists the waits; when a never opens again
// for a step, the plan stops there with WindowNeverOpens set and the rest
// of its timeline unshifted. Total is the wall-clock duration, waits
// included; CriticalPath stays a bound on the work alone.
func (p Plan) InWindows(a Availability) Plan {
	type event struct {
		step, batch int // batch -1: the step itself
		start, end  time.Time
		target      Target
		gated       bool
	}
	out := p
	out.Steps = slices.Clone(p.Steps)
	var events []event
	for i := range out.Steps {
		s := &out.Steps[i]
		s.Batches = slices.Clone(s.Batches)
		s.Phases = slices.Clone(s.Phases)
		t, gated := (&Step{Kind: s.Kind, Role: s.Role}).Target()
		if len(s.Batches) == 0 {
			events = append(events, event{step: i, batch: -1, start: s.Start, end: s.End, target: t, gated: gated})
			continue
		}
		for b := range s.Batches {
			events = append(events, event{step: i, batch: b, start: s.Batches[b].Start, end: s.Batches[b].End, target: t, gated: gated})
		}
	}
	slices.SortStableFunc(events, func(x, y event) int { return x.start.Compare(y.start) })

	var shift time.Duration
	first := make(map[int]time.Duration, len(out.Steps)) // each step's shift at its first event
	for _, e := range events {
		at := e.start.Add(shift)
		if e.gated && !out.WindowNeverOpens {
			next, ok := a.NextStart(e.target, at)
			switch {
			case !ok:
				out.WindowNeverOpens = true
			case next.After(at):
				out.Waits = append(out.Waits, PlannedWait{Start: at, End: next, Step: out.Steps[e.step].ID, Target: e.target})
				shift += next.Sub(at)
			}
		}
		s := &out.Steps[e.step]
		if _, ok := first[e.step]; !ok {
			first[e.step] = shift
			s.Start = e.start.Add(shift)
		}
		if e.batch >= 0 {
			b := &s.Batches[e.batch]
			b.Start, b.End = b.Start.Add(shift), b.End.Add(shift)
		}
		if end := e.end.Add(shift); end.After(s.End) {
			s.End = end
		}
	}
	for i := range out.Steps {
		s := &out.Steps[i]
		for j := range s.Phases {
			s.Phases[j].Start, s.Phases[j].End = s.Phases[j].Start.Add(first[i]), s.Phases[j].End.Add(first[i])
		}
		if s.End.After(out.End) {
			out.End = s.End
		}
	}
	out.Total = out.End.Sub(out.Start)
	return out
}
