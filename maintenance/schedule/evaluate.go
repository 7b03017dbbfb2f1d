package schedule

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// Pass is one evaluation of the whole fleet.
type Pass struct {
	// Decisions has one entry per cluster, in the order they were
	// considered (families by name, a family's admin cluster first, then
	// its user clusters by name).
	Decisions []Decision
	// Wake is the earliest Wake of the decisions (zero: none).
	Wake time.Time
}

// Starts returns the decisions that start an upgrade.
func (p Pass) Starts() []Decision { return p.only(ActStart) }

// Records returns the decisions that record an attempt's outcome.
func (p Pass) Records() []Decision { return p.only(ActRecord) }

func (p Pass) only(a Action) []Decision {
	var out []Decision
	for _, d := range p.Decisions {
		if d.Action == a {
			out = append(out, d)
		}
	}
	return out
}

// Evaluate decides for every cluster of f at now. A start counts against
// the concurrency limits of the clusters considered after it, so one pass
// never decides more starts than the limits allow.
func Evaluate(f *Fleet, now time.Time) Pass {
	e := newEvaluator(f, now)
	var p Pass
	for _, c := range e.order() {
		d := e.decide(c)
		if d.Action == ActStart {
			e.familyBusy[familyOf(c)]++
			e.fleetBusy++
		}
		if !d.Wake.IsZero() && (p.Wake.IsZero() || d.Wake.Before(p.Wake)) {
			p.Wake = d.Wake
		}
		p.Decisions = append(p.Decisions, d)
	}
	return p
}

// EvaluateCluster decides for the named cluster alone, counting the
// upgrades in progress in f against the limits. It is how the state
// machine re-checks a decision on the state the decision's command lands
// on: Evaluate and EvaluateCluster agree whenever the starts Evaluate
// decided before the cluster have been applied to f.
func EvaluateCluster(f *Fleet, name string, now time.Time) (Decision, bool) {
	e := newEvaluator(f, now)
	c, ok := e.byName[name]
	if !ok {
		return Decision{}, false
	}
	return e.decide(c), true
}

type evaluator struct {
	f          *Fleet
	now        time.Time
	byName     map[string]*Cluster
	users      map[string][]*Cluster
	familyBusy map[string]int
	fleetBusy  int
	perFamily  int
	seqs       *sequences
}

func newEvaluator(f *Fleet, now time.Time) *evaluator {
	e := &evaluator{f: f, now: now.UTC(), byName: make(map[string]*Cluster, len(f.Clusters)),
		users: map[string][]*Cluster{}, familyBusy: map[string]int{}, perFamily: f.Limits.PerFamily}
	if e.perFamily <= 0 {
		e.perFamily = DefaultPerFamily
	}
	e.seqs = newSequences(f, e.now)
	for i := range f.Clusters {
		c := &f.Clusters[i]
		e.byName[c.Name] = c
		if c.Kind == phases.KindUser {
			e.users[c.Admin] = append(e.users[c.Admin], c)
		}
		if c.Upgrade.InProgress() {
			e.familyBusy[familyOf(c)]++
			e.fleetBusy++
		}
	}
	return e
}

// familyOf is the family a cluster belongs to: its admin cluster's name
// for a user cluster, its own otherwise.
func familyOf(c *Cluster) string {
	if c.Kind == phases.KindUser {
		return c.Admin
	}
	return c.Name
}

// order returns the clusters in the order they are considered: families
// by name; in a family, its head (the admin or hybrid cluster) first, then
// the user clusters by name.
func (e *evaluator) order() []*Cluster {
	out := make([]*Cluster, 0, len(e.f.Clusters))
	for i := range e.f.Clusters {
		out = append(out, &e.f.Clusters[i])
	}
	slices.SortFunc(out, func(a, b *Cluster) int {
		if c := strings.Compare(familyOf(a), familyOf(b)); c != 0 {
			return c
		}
		// The head of the family sorts first.
		if ah, bh := a.Kind != phases.KindUser, b.Kind != phases.KindUser; ah != bh {
			if ah {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// decide applies the rules of the package comment to one cluster.
func (e *evaluator) decide(c *Cluster) Decision {
	d := Decision{Cluster: c.Name, State: c.Auto}
	st := &d.Status
	st.Channel, st.Current = c.Channel, c.Current
	st.EndOfSupport = e.f.Catalog.EndOfSupport[c.Current.Minor]
	if rec, ok := e.outcome(c); ok {
		d.Action, d.Record, d.State = ActRecord, rec, ApplyOutcome(c.Auto, rec)
	}
	auto := d.State
	if auto.Last != nil {
		last := *auto.Last
		st.LastAttempt = &last
	}
	if e.now.Before(auto.NextAttempt) {
		st.NextAttempt = auto.NextAttempt
	}
	ch, chOK := e.f.Catalog.Channels[c.Channel]
	if chOK && Subscribed(c.Channel) {
		st.Target = ch.Target
	}

	if u := c.Upgrade; u.InProgress() {
		e.inProgress(c, u, &d)
		return d
	}
	if eos, past := e.pastEndOfSupport(c); past {
		// Off an unsupported minor, whatever the channel says.
		if next, ok := e.eosStep(c, st.Target); ok {
			st.Next, st.Forced = next, true
			return e.decideStep(&d, &step{c: c, auto: auto, ch: ch, next: next, kind: maintenance.KindMinor, forced: true}, eos)
		}
	}
	if !Subscribed(c.Channel) {
		st.State = StateManualOnly
		st.Message = "not on a release channel: upgrades are manual only"
		if c.Channel != "" && c.Channel != ChannelNone {
			st.Message = fmt.Sprintf("channel %q is not one of rapid, regular, stable: upgrades are manual only", c.Channel)
		}
		e.idleUntilEndOfSupport(&d, c)
		return d
	}
	if !chOK || ch.Target.IsZero() {
		st.State = StateUpToDate
		st.Message = fmt.Sprintf("channel %s has no auto-upgrade target", c.Channel)
		e.idleUntilEndOfSupport(&d, c)
		return d
	}
	if !c.Current.Less(ch.Target) {
		st.State = StateUpToDate
		st.Message = fmt.Sprintf("runs %s, at or past channel %s's auto-upgrade target %s", c.Current, c.Channel, ch.Target)
		e.idleUntilEndOfSupport(&d, c)
		return d
	}

	next, kind, ok := e.nextStep(c, ch.Target)
	if !ok {
		e.block(&d, StateBlockedByRule, Block{Kind: BlockRule, Name: RuleNoRelease,
			Detail: fmt.Sprintf("the catalog has no release of %d.%d at or below the target %s", c.Current.Major, c.Current.Minor+1, ch.Target)})
		return d
	}
	st.Next = next
	eos := e.f.Catalog.EndOfSupport[c.Current.Minor]
	if eos.After(e.now) {
		// From then on the minor is forced through windows and exclusions.
		d.wake(eos)
	}
	return e.decideStep(&d, &step{c: c, auto: auto, ch: ch, next: next, kind: kind}, eos)
}

// decideStep decides on the step s: every blocker that applies holds it back;
// none, and it starts.
func (e *evaluator) decideStep(d *Decision, s *step, eos time.Time) Decision {
	hs := e.holds(s)
	d.Status.Sequence = s.seq
	if len(hs) > 0 {
		e.held(d, s, hs)
		return *d
	}
	d.Status.State = StateStarting
	d.Kind, d.To, d.EndOfSupport = s.kind, s.next, s.forced
	d.Reason = reason(s.c, s.ch, s.next, s.kind)
	if w := s.seq; w != nil && !s.forced {
		d.Reason += fmt.Sprintf(" (sequence %s, stage %s)", w.Sequence, w.Stage)
	}
	if s.forced {
		d.Reason = eosReason(s.c, s.ch, s.next, eos)
		if w := s.seq; w != nil && w.Bypassed {
			d.SequenceBypassed = true
			d.Reason += fmt.Sprintf("; bypassing rollout sequence %s (stage %s still waits for stage %s)", w.Sequence, w.Stage, w.WaitsFor)
		}
	}
	d.Status.Message = "due now: " + d.Reason
	if d.Action == ActNone {
		d.Action = ActStart
	}
	return *d
}

// inProgress reports an upgrade that has not ended.
func (e *evaluator) inProgress(c *Cluster, u *Upgrade, d *Decision) {
	st := &d.Status
	st.Next = u.To
	how := "manual"
	if u.Automatic {
		how = "automatic"
	}
	st.State = StateRunning
	st.Message = fmt.Sprintf("%s upgrade %s (%s → %s) is %s", how, u.ID, u.From, u.To, u.State)
	if !u.Automatic || u.PauseReason == "" {
		return
	}
	st.State = StatePausedAtWindowEnd
	st.Message = fmt.Sprintf("automatic upgrade %s (%s → %s) paused at a safe point (%s); it resumes when the window opens and no exclusion covers it",
		u.ID, u.From, u.To, u.PauseReason)
	kind := KindOf(u.From, u.To)
	blocks, _ := e.policy(c, kind)
	st.BlockedBy = blocks
	st.NextOpportunity = e.opportunity(c, kind, false, e.now)
	d.wake(st.NextOpportunity)
}

// nextStep is the next version towards target: the newest patch of the
// current minor in the catalog first (at most target), else the newest
// release of the next minor at most target.
func (e *evaluator) nextStep(c *Cluster, target phases.Version) (phases.Version, maintenance.ChangeKind, bool) {
	cur := c.Current
	var patch, minor phases.Version
	for _, v := range e.f.Catalog.Versions {
		if v.Major != cur.Major || target.Less(v) || !cur.Less(v) {
			continue
		}
		switch v.Minor {
		case cur.Minor:
			patch = v
		case cur.Minor + 1:
			minor = v
		}
	}
	// (A minor past its end of support goes straight to the next minor,
	// eosStep, when the catalog has one.)
	if !patch.IsZero() {
		return patch, maintenance.KindPatch, true
	}
	if !minor.IsZero() {
		return minor, maintenance.KindMinor, true
	}
	return phases.Version{}, "", false
}

// rules applies the version rules and the admin/user skew (SPEC §3) and a
// cancelled upgrade's mixed nodes to the step cur → next.
func (e *evaluator) rules(c *Cluster, next phases.Version, kind maintenance.ChangeKind) []Block {
	if err := phases.CheckUpgrade(c.Current, next); err != nil {
		return []Block{{Kind: BlockRule, Name: RuleVersion, Detail: err.Error()}}
	}
	if u := c.Upgrade; u != nil && u.State == phases.UpgradeCancelled && u.Mixed && u.To != next {
		return []Block{{Kind: BlockRule, Name: RuleMixedCluster,
			Detail: fmt.Sprintf("cancelled upgrade %s left nodes at %s; finish it or roll its pools back first", u.ID, u.To)}}
	}
	var blocks []Block
	switch c.Kind {
	case phases.KindAdmin, phases.KindHybrid:
		if kind != maintenance.KindMinor {
			break
		}
		for _, u := range e.users[c.Name] {
			if u.Current.Minor < c.Current.Minor {
				blocks = append(blocks, Block{Kind: BlockSkew, Name: u.Name,
					Detail: fmt.Sprintf("user cluster %s runs %s; it must reach %s.x before its admin cluster goes to %s", u.Name, u.Current, c.Current.MinorString(), next.MinorString())})
			}
		}
	case phases.KindUser:
		if a, ok := e.byName[c.Admin]; ok {
			if err := phases.CheckUserUpgrade(next, a.Current); err != nil {
				blocks = append(blocks, Block{Kind: BlockSkew, Name: a.Name,
					Detail: fmt.Sprintf("its admin cluster %s runs %s; a user cluster never goes past its admin (it goes first)", a.Name, a.Current)})
			}
		}
	}
	return blocks
}

// policy returns what of the maintenance policy blocks the change now,
// and the state that names it.
func (e *evaluator) policy(c *Cluster, kind maintenance.ChangeKind) ([]Block, StatusState) {
	if c.PolicyInvalid {
		return []Block{{Kind: BlockRule, Name: RulePolicyInvalid, Detail: "the stored maintenance policy no longer compiles; automatic upgrades wait until it is replaced"}}, StateWaitingForWindow
	}
	if c.Policy == nil {
		return nil, ""
	}
	dec := c.Policy.Allowed(Change(kind), e.now)
	if dec.Allowed {
		return nil, ""
	}
	state := StateWaitingForWindow
	var blocks []Block
	for _, name := range dec.BlockedBy {
		if name == maintenance.BlockedByWindow {
			b := Block{Kind: BlockWindow, Name: name, Detail: "outside the maintenance window"}
			if open, ok := c.Policy.NextWindowOpen(e.now); ok {
				b.Until = open
			}
			blocks = append(blocks, b)
			continue
		}
		state = StateBlockedExclusion
		b := Block{Kind: BlockExclusion, Name: name}
		if ex, ok := c.Policy.Exclusion(name); ok {
			b.Until, b.Detail = ex.End, fmt.Sprintf("maintenance exclusion (%s)", ex.Scope)
		}
		blocks = append(blocks, b)
	}
	return blocks, state
}

// opportunity is the earliest instant at or after from when the change
// may run as far as the policy tells (a forced change: from itself).
func (e *evaluator) opportunity(c *Cluster, kind maintenance.ChangeKind, forced bool, from time.Time) time.Time {
	if from.Before(e.now) {
		from = e.now
	}
	if forced || c.Policy == nil {
		if c.PolicyInvalid && !forced {
			return time.Time{}
		}
		return from
	}
	t, ok := c.Policy.NextOpportunity(Change(kind), from)
	if !ok {
		return time.Time{}
	}
	return t
}

func (d *Decision) wake(t time.Time) {
	if t.IsZero() {
		return
	}
	if d.Wake.IsZero() || t.Before(d.Wake) {
		d.Wake = t
	}
}

// outcome returns the record of the last automatic attempt once its
// upgrade has ended and the end is not yet recorded.
func (e *evaluator) outcome(c *Cluster) (*Attempt, bool) {
	return Outcome(c.Auto.Last, c.Upgrade, c.Ended, e.now)
}

// Outcome returns the record of the attempt last once its upgrade has
// ended and its end is not yet recorded: current is the cluster's current
// (or last) upgrade, ended the attempt's upgrade found in the cluster's
// history (nil: not there). An upgrade found nowhere left no trace (it was
// cancelled and replaced): its outcome is cancelled at now.
func Outcome(last *Attempt, current, ended *Upgrade, now time.Time) (*Attempt, bool) {
	if last == nil || last.Outcome != "" {
		return nil, false
	}
	var u *Upgrade
	switch {
	case current != nil && current.ID == last.Upgrade:
		u = current
	case ended != nil && ended.ID == last.Upgrade:
		u = ended
	}
	rec := *last
	if u == nil {
		rec.Outcome, rec.FinishedAt, rec.Detail = OutcomeCancelled, now, "the upgrade is no longer recorded"
		return &rec, true
	}
	if u.InProgress() {
		return nil, false
	}
	rec.FinishedAt = u.FinishedAt
	if rec.FinishedAt.IsZero() {
		rec.FinishedAt = now
	}
	switch u.State {
	case phases.UpgradeDone:
		rec.Outcome = OutcomeDone
	case phases.UpgradeRefused:
		rec.Outcome = OutcomeRefused
		rec.Detail = "preflight failed: " + strings.Join(u.RefusedChecks, ", ")
	case phases.UpgradeFailed:
		rec.Outcome, rec.Detail = OutcomeFailed, "the upgrade failed"
	default:
		rec.Outcome, rec.Detail = OutcomeCancelled, "the upgrade was cancelled"
	}
	return &rec, true
}

// ApplyOutcome returns s after the attempt rec ended: a finished attempt
// clears the backoff (and, for a minor, paces catch-up from its start);
// any other outcome counts a failure and sets the backoff from the
// attempt's end.
func ApplyOutcome(s State, rec *Attempt) State {
	r := *rec
	s.Last = &r
	if rec.Outcome == OutcomeDone {
		s.Failures, s.NextAttempt = 0, time.Time{}
		if rec.Kind == maintenance.KindMinor {
			s.LastMinorAt = rec.StartedAt
		}
		return s
	}
	s.Failures++
	s.NextAttempt = rec.FinishedAt.Add(Backoff(s.Failures))
	return s
}

func refusedChecks(c *Cluster, last *Attempt) []string {
	for _, u := range []*Upgrade{c.Upgrade, c.Ended} {
		if u != nil && u.ID == last.Upgrade {
			return u.RefusedChecks
		}
	}
	return nil
}

// Change is the change an automatic upgrade of that kind asks the
// maintenance policy about before it starts: the control plane's (it goes
// first; node steps are gated one by one as they come, Gate).
func Change(kind maintenance.ChangeKind) maintenance.Change {
	return maintenance.Change{Target: maintenance.TargetControlPlane, Kind: kind}
}

// KindOf is the kind of change from → to: a minor or a patch.
func KindOf(from, to phases.Version) maintenance.ChangeKind {
	if to.Minor != from.Minor {
		return maintenance.KindMinor
	}
	return maintenance.KindPatch
}

func plural(n int) string {
	if n == 1 {
		return "backing off"
	}
	return "backing off exponentially"
}

// reason is the audit sentence of a start towards the channel's target.
func reason(c *Cluster, ch Channel, next phases.Version, kind maintenance.ChangeKind) string {
	return fmt.Sprintf("automatic %s upgrade %s → %s: channel %s targets %s", kind, c.Current, next, ch.Name, ch.Target)
}
