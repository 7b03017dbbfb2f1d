package maintenance

import (
	"slices"
	"time"
)

// Compiled is a normalised policy with its recurrence parsed and, for each
// known change, the exclusion intervals that block it merged in advance, so
// Allowed and NextOpportunity do no parsing. It is immutable and safe for
// concurrent use.
type Compiled struct {
	policy Policy
	window *compiledWindow // nil: always open
	// blocks holds, per known change, the merged intervals of the
	// exclusions that block it.
	blocks map[Change][]interval
	// blockAll merges every exclusion; it answers for unknown changes.
	blockAll []interval
}

// Compile normalises p and prepares it for queries. It checks only what it
// needs to compute (instants in range, window end after start, a parsable
// recurrence); Validate checks the rest. Errors are *RuleError.
func (p Policy) Compile() (*Compiled, error) {
	n := Normalize(p)
	if err := checkWindowShape(n.Window); err != nil {
		return nil, err
	}
	c := &Compiled{policy: n, blocks: make(map[Change][]interval, 6)}
	if w := n.Window; w != nil {
		cw := &compiledWindow{first: w.Start, dur: w.End.Sub(w.Start)}
		if w.Recurrence != "" {
			rec, err := parseRecurrence(w.Recurrence, w.Start)
			if err != nil {
				return nil, err
			}
			cw.rec = rec
		}
		c.window = cw
	}
	if err := checkExclusionShapes(n.Exclusions); err != nil {
		return nil, err
	}
	for _, t := range []Target{TargetControlPlane, TargetNodes} {
		for _, k := range []ChangeKind{KindMinor, KindPatch, KindDisruption} {
			ch := Change{Target: t, Kind: k}
			var ivs []interval
			for _, e := range n.Exclusions {
				if e.Scope.Blocks(ch) {
					ivs = append(ivs, interval{e.Start, e.End})
				}
			}
			c.blocks[ch] = merge(ivs)
		}
	}
	all := make([]interval, 0, len(n.Exclusions))
	for _, e := range n.Exclusions {
		all = append(all, interval{e.Start, e.End})
	}
	c.blockAll = merge(all)
	return c, nil
}

// Policy returns a copy of the normalised policy c was compiled from.
func (c *Compiled) Policy() Policy {
	out := Policy{Exclusions: slices.Clone(c.policy.Exclusions)}
	if c.policy.Window != nil {
		w := *c.policy.Window
		out.Window = &w
	}
	return out
}

func (c *Compiled) blocking(ch Change) []interval {
	if b, ok := c.blocks[ch]; ok {
		return b
	}
	return c.blockAll
}

// Allowed says whether ch may run automatically at the instant at. The
// coordinator skips this check for manual upgrades and for an emergency
// override with a reason (CheckOverrideReason).
func (c *Compiled) Allowed(ch Change, at time.Time) Decision {
	at = at.UTC()
	var d Decision
	broadest := 0
	for _, e := range c.policy.Exclusions {
		if !at.Before(e.Start) && at.Before(e.End) && e.Scope.Blocks(ch) {
			d.BlockedBy = append(d.BlockedBy, e.Name)
			if r := e.Scope.restrictiveness(); r > broadest {
				broadest = r
				d.PauseReason = scopeReason(e.Scope)
			}
		}
	}
	inWindow := true
	if c.window != nil {
		d.WindowEnds, inWindow = c.window.stretchEnd(at, at.Add(WindowEndsHorizon))
		if !inWindow {
			d.BlockedBy = append(d.BlockedBy, BlockedByWindow)
			if d.PauseReason == PauseNone {
				d.PauseReason = PauseMaintenanceWindow
			}
		}
	}
	d.Allowed = len(d.BlockedBy) == 0
	return d
}

// NextOpportunity returns the earliest instant at or after after when
// Allowed(ch, ·) holds, or false if there is none within SearchHorizon.
// It jumps from boundary to boundary (exclusion ends, occurrence starts),
// so its cost grows with the number of exclusions, not with the distance.
func (c *Compiled) NextOpportunity(ch Change, after time.Time) (time.Time, bool) {
	after = after.UTC()
	return c.nextOpportunity(ch, after, after.Add(SearchHorizon))
}

func (c *Compiled) nextOpportunity(ch Change, after, limit time.Time) (time.Time, bool) {
	blocks := c.blocking(ch)
	t := after
	i := 0
	for !t.After(limit) {
		for i < len(blocks) && !blocks[i].end.After(t) {
			i++
		}
		if i < len(blocks) && blocks[i].contains(t) {
			t = blocks[i].end // merged: the end is never inside another block
			continue
		}
		if c.window == nil {
			return t, true
		}
		open, next, ok := c.window.openAt(t)
		if !ok {
			return time.Time{}, false
		}
		if open {
			return t, true
		}
		t = next
	}
	return time.Time{}, false
}

// Allowed compiles p and asks the compiled policy. A policy that cannot be
// compiled fails closed: blocked by the window. Callers that ask often
// should Compile once.
func (p Policy) Allowed(ch Change, at time.Time) Decision {
	c, err := p.Compile()
	if err != nil {
		return Decision{BlockedBy: []string{BlockedByWindow}, PauseReason: PauseMaintenanceWindow}
	}
	return c.Allowed(ch, at)
}

// NextOpportunity compiles p and asks the compiled policy; a policy that
// cannot be compiled has no opportunity.
func (p Policy) NextOpportunity(ch Change, after time.Time) (time.Time, bool) {
	c, err := p.Compile()
	if err != nil {
		return time.Time{}, false
	}
	return c.NextOpportunity(ch, after)
}

// NextWindowOpen returns the earliest instant at or after after when the
// window is open, whatever the exclusions say (after itself without a
// window); false when the window never opens again.
func (c *Compiled) NextWindowOpen(after time.Time) (time.Time, bool) {
	after = after.UTC()
	if c.window == nil {
		return after, true
	}
	open, next, ok := c.window.openAt(after)
	if !ok {
		return time.Time{}, false
	}
	if open {
		return after, true
	}
	return next, true
}

// Exclusion returns the policy's exclusion of that name.
func (c *Compiled) Exclusion(name string) (Exclusion, bool) {
	for _, e := range c.policy.Exclusions {
		if e.Name == name {
			return e, true
		}
	}
	return Exclusion{}, false
}
