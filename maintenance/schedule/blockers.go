package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// step is the next step the scheduler considers for a cluster, and what
// it is judged by.
type step struct {
	c    *Cluster
	auto State
	ch   Channel
	next phases.Version
	kind maintenance.ChangeKind
	// forced: the current minor is past its end of support, and the step
	// runs through windows, exclusions and the catch-up pace.
	forced bool
	// seq is where the cluster stands in its rollout sequence for next
	// (set by sequenceHold; nil: in no sequence).
	seq *SequenceWait
}

// hold is what one blocker says about a step: the blocks it finds now
// (none: it does not apply) and the status state that names them.
type hold struct {
	state  StatusState
	blocks []Block
	// notBefore is the earliest instant the blocker lets the step start,
	// when it can tell (the backoff's end, the catch-up pace's due date);
	// the next opportunity is asked of the maintenance policy from the
	// latest of them.
	notBefore time.Time
}

// A blocker is one kind of thing that may hold a step back. Every blocker
// that applies is reported, each block with its own Until (Status.
// BlockedBy); the first one in blockers that applies names the status
// state. Adding a kind of blocker is adding it to this list.
type blocker func(e *evaluator, s *step) hold

// blockers in the order their state takes precedence: a registration
// hold first (the operator has not said yet when the cluster may be
// disrupted), then the last attempt's failure (it is what an operator
// must act on), then the pace, the version rules and skew, a node drifted
// from the record, the maintenance policy, and the concurrency limits
// (which only another upgrade's end frees).
var blockers = []blocker{
	(*evaluator).registrationHold,
	(*evaluator).backoffHold,
	(*evaluator).paceHold,
	(*evaluator).sequenceHold,
	(*evaluator).rulesHold,
	(*evaluator).driftHold,
	(*evaluator).policyHold,
	(*evaluator).limitsHold,
}

// holds runs every blocker on s and returns those that apply.
func (e *evaluator) holds(s *step) []hold {
	var out []hold
	for _, b := range blockers {
		if h := b(e, s); len(h.blocks) > 0 {
			out = append(out, h)
		}
	}
	return out
}

// registrationHold: a cluster registered without a maintenance policy
// waits for its operator, even past its end of support (hold.go).
func (e *evaluator) registrationHold(s *step) hold {
	if !Held(s.auto, e.now) {
		return hold{}
	}
	return hold{state: StateBlockedByRule, notBefore: s.auto.HeldUntil, blocks: []Block{holdBlock(s.auto.HeldUntil)}}
}

// backoffHold: no automatic start before the backoff after failures ends,
// whatever else allows (never a loop). A refused attempt names its checks.
func (e *evaluator) backoffHold(s *step) hold {
	auto := s.auto
	if !e.now.Before(auto.NextAttempt) {
		return hold{}
	}
	h := hold{state: StateBackoff, notBefore: auto.NextAttempt, blocks: []Block{{Kind: BlockRule, Name: RuleBackoff, Until: auto.NextAttempt,
		Detail: fmt.Sprintf("%s after %d failed automatic attempt(s) in a row", plural(auto.Failures), auto.Failures)}}}
	if last := auto.Last; last != nil && last.Outcome == OutcomeRefused {
		h.state, h.blocks = StatePreflightFailed, nil
		for _, chk := range refusedChecks(s.c, last) {
			h.blocks = append(h.blocks, Block{Kind: BlockCheck, Name: chk, Until: auto.NextAttempt, Detail: "preflight check failed"})
		}
		if len(h.blocks) == 0 {
			h.blocks = []Block{{Kind: BlockCheck, Name: "preflight", Until: auto.NextAttempt, Detail: last.Detail}}
		}
	}
	return h
}

// paceHold: one minor per CatchUpInterval while more than one behind the
// channel (not for a minor past its end of support).
func (e *evaluator) paceHold(s *step) hold {
	if s.kind != maintenance.KindMinor || s.forced {
		return hold{}
	}
	c, ch := s.c, s.ch
	behind := ch.Target.Minor
	if ch.Default.Major == c.Current.Major && ch.Default.Minor > behind {
		behind = ch.Default.Minor
	}
	nm, due, dueAt := maintenance.CatchUp(c.Current.Minor, behind, s.auto.LastMinorAt, e.now)
	if nm == c.Current.Minor || due {
		return hold{}
	}
	return hold{state: StateBlockedByRule, notBefore: dueAt, blocks: []Block{{Kind: BlockRule, Name: RuleCatchUpPace, Until: dueAt,
		Detail: fmt.Sprintf("catching up one minor per %d days; the last automatic minor upgrade started %s",
			int(maintenance.CatchUpInterval/(24*time.Hour)), s.auto.LastMinorAt.Format(time.RFC3339))}}}
}

// rulesHold: the version rules, the admin/user skew and a mixed cluster.
func (e *evaluator) rulesHold(s *step) hold {
	return hold{state: StateBlockedByRule, blocks: e.rules(s.c, s.next, s.kind)}
}

// policyHold: the maintenance window and the exclusions that cover the
// change (not for a minor past its end of support).
func (e *evaluator) policyHold(s *step) hold {
	if s.forced {
		return hold{}
	}
	blocks, state := e.policy(s.c, s.kind)
	return hold{state: state, blocks: blocks}
}

// limitsHold: the upgrades in progress (or started earlier in this pass)
// in the cluster's family and in the fleet.
func (e *evaluator) limitsHold(s *step) hold {
	c := s.c
	var blocks []Block
	if n := e.familyBusy[familyOf(c)]; n >= e.perFamily {
		blocks = append(blocks, Block{Kind: BlockRule, Name: RuleFamilyLimit,
			Detail: fmt.Sprintf("%d upgrade(s) in progress in the family of %s, at most %d at once", n, familyOf(c), e.perFamily)})
	}
	if lim := e.f.Limits.Fleet; lim > 0 && e.fleetBusy >= lim {
		blocks = append(blocks, Block{Kind: BlockRule, Name: RuleFleetLimit,
			Detail: fmt.Sprintf("%d upgrade(s) in progress in the fleet, at most %d at once", e.fleetBusy, lim)})
	}
	return hold{state: StateBlockedByRule, blocks: blocks}
}

// held reports the holds on s in d: the first one's state, every block,
// the next opportunity as far as the timed blockers and the policy tell,
// and a wake at the earliest instant one of them ends.
func (e *evaluator) held(d *Decision, s *step, hs []hold) {
	var blocks []Block
	from, timed := e.now, false
	for _, h := range hs {
		blocks = append(blocks, h.blocks...)
		if !h.notBefore.IsZero() {
			timed = true
			if h.notBefore.After(from) {
				from = h.notBefore
			}
		}
	}
	for _, b := range blocks {
		if b.Kind == BlockWindow || b.Kind == BlockExclusion {
			timed = true
		}
		if !b.Until.IsZero() {
			d.wake(b.Until)
		}
	}
	if timed {
		// Only the window, the exclusions, the backoff and the pace can
		// tell when; a rule or a limit alone frees it at no known time.
		d.Status.NextOpportunity = e.opportunity(s.c, s.kind, s.forced, from)
	}
	e.block(d, hs[0].state, blocks...)
}

// block reports blocks in d with state, and says them all in the message.
func (e *evaluator) block(d *Decision, state StatusState, blocks ...Block) {
	st := &d.Status
	st.State = state
	st.BlockedBy = append(st.BlockedBy, blocks...)
	var parts []string
	for _, b := range st.BlockedBy {
		s := fmt.Sprintf("%s %s", b.Kind, b.Name)
		if b.Detail != "" {
			s += " (" + b.Detail + ")"
		}
		if !b.Until.IsZero() {
			s += " until " + b.Until.Format(time.RFC3339)
		}
		parts = append(parts, s)
	}
	what := "waits for " + strings.Join(parts, "; ")
	if len(parts) > 1 {
		what = fmt.Sprintf("waits for %d things at once: %s", len(parts), strings.Join(parts, "; "))
	}
	if !st.NextOpportunity.IsZero() {
		what += "; next opportunity " + st.NextOpportunity.Format(time.RFC3339)
	}
	st.Message = fmt.Sprintf("%s → %s %s", st.Current, st.Next, what)
	if st.Next.IsZero() {
		st.Message = what
	}
}
