package schedule

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/moltproject/molt/phases"
)

// Rollout sequences (docs/rollout-sequences.md). A sequence is an ordered
// list of stages, each a set of clusters (named, or selected by their
// labels) with a soak after it. A version V becomes eligible for the
// clusters of stage k+1 only once stage k is done with V:
//
//   - every cluster of stage k runs V or later;
//   - the soak of stage k has passed since the last of them reached V (a
//     cluster that ran V before any upgrade of it is recorded counts as
//     having reached it long ago);
//   - no upgrade to V failed in stage k (a failed upgrade includes one
//     whose pools were rolled back after a failure), unless an operator
//     resumed stage k for V after that failure.
//
// An operator may also skip stage k for V: stage k+1 then waits for what
// stage k waited for, not for stage k's clusters. Stage 0 waits for
// nothing. The gate is one more blocker of a step (sequenceHold): windows,
// exclusions, the backoff and the limits still rule each cluster, and a
// step forced by an end of support is not held by the sequence (it is
// reported as having bypassed it). A cluster outside every sequence is
// scheduled as before.

// Override actions an operator records on a stage for a version.
const (
	// OverrideResume: failures of upgrades to the version in the stage
	// that ended before the override no longer hold the stages after it.
	OverrideResume = "resume"
	// OverrideSkip: the stages after it no longer wait for the stage's
	// clusters for the version.
	OverrideSkip = "skip"
)

// Sequence is a rollout sequence as the scheduler reads it.
type Sequence struct {
	Name   string
	Stages []Stage
	// Overrides are the operators' resumes and skips, oldest first.
	Overrides []Override
	// Failures are the failed upgrades of the sequence's clusters,
	// oldest first: an upgrade's history keeps only those that finished,
	// so the sequence keeps these.
	Failures []Failure
}

// Failure is an upgrade of a cluster of a sequence that failed (an
// upgrade whose pools were rolled back after a failure ends failed too).
type Failure struct {
	Cluster string
	Version phases.Version
	At      time.Time
}

// Stage is one stage of a sequence: the clusters named in Clusters and
// those whose labels carry every pair of Selector (an empty selector
// selects nothing), and the soak after the stage.
type Stage struct {
	Name     string
	Clusters []string
	Selector map[string]string
	Soak     time.Duration
}

// Override is an operator's resume or skip of a stage for a version.
type Override struct {
	Version phases.Version
	// Stage is the stage's index in its sequence.
	Stage  int
	Action string
	At     time.Time
}

// Place is where a cluster stands in the sequences: its sequence and the
// index of its stage.
type Place struct {
	Sequence int
	Stage    int
}

// Selects reports whether the stage takes a cluster of that name and
// labels.
func (st *Stage) Selects(name string, labels map[string]string) bool {
	if slices.Contains(st.Clusters, name) {
		return true
	}
	if len(st.Selector) == 0 {
		return false
	}
	for k, v := range st.Selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Places returns, for one cluster, every stage of every sequence that
// takes it: more than one is a conflict (a cluster is in at most one
// sequence and at most one stage of it), which the state machine refuses
// and the scheduler resolves by taking the first.
func Places(seqs []Sequence, name string, labels map[string]string) []Place {
	var out []Place
	for i := range seqs {
		for j := range seqs[i].Stages {
			if seqs[i].Stages[j].Selects(name, labels) {
				out = append(out, Place{Sequence: i, Stage: j})
			}
		}
	}
	return out
}

// Rules a sequence block names.
const (
	// RuleSequenceStage: the previous stage has not reached the version
	// or has not soaked.
	RuleSequenceStage = "rollout-sequence"
	// RuleSequenceHold: an upgrade to the version failed in an earlier
	// stage, and no operator has resumed or skipped it.
	RuleSequenceHold = "rollout-sequence-held"
)

// BlockSequence is the kind of a sequence's block.
const BlockSequence BlockKind = "sequence"

// StateWaitingForStage: the next step waits for an earlier stage of the
// cluster's rollout sequence.
const StateWaitingForStage StatusState = "waiting-for-stage"

// SequenceWait says where a cluster stands in its rollout sequence for the
// version of its next step.
type SequenceWait struct {
	Sequence string
	Stage    string
	// StageIndex is Stage's index (0: the first stage).
	StageIndex int
	Version    phases.Version
	// WaitsFor is the stage the cluster waits for (empty: none, the step
	// is eligible).
	WaitsFor      string
	WaitsForIndex int
	// NotReached are the clusters of WaitsFor that do not run Version yet.
	NotReached []string
	// SoakEnds is when WaitsFor's soak ends once all its clusters run
	// Version (zero: not all do yet, or no soak).
	SoakEnds time.Time
	// Held is set when an upgrade to Version failed in WaitsFor and no
	// operator has resumed or skipped the stage; Failed names those
	// clusters.
	Held   bool
	Failed []string
	// HeldStage is the stage where they failed: WaitsFor, or a stage
	// before it that WaitsFor itself waits for.
	HeldStage string
	// Bypassed is set when an end of support forced the step through the
	// sequence.
	Bypassed bool
}

// Eligible reports whether the step may start as far as the sequence says.
func (w *SequenceWait) Eligible() bool { return w == nil || w.WaitsFor == "" }

// StageProgress is what one stage of a sequence has done with a version.
type StageProgress struct {
	Name     string
	Clusters []string
	// Reached are the stage's clusters that run the version or later,
	// NotReached the others.
	Reached    []string
	NotReached []string
	// ReachedAt is when the last of them reached it, once all have (zero:
	// not all yet, or all ran it before any recorded upgrade).
	ReachedAt time.Time
	// SoakEnds is ReachedAt plus the stage's soak, once all have reached
	// it.
	SoakEnds time.Time
	// Done: every cluster runs the version, the soak passed and no
	// failure holds the stages after it.
	Done bool
	// Failed are the clusters whose upgrade to the version failed since
	// the last resume; Held is set while that holds the later stages.
	Failed []string
	Held   bool
	// Skipped: an operator skipped the stage for the version.
	Skipped bool
	// Open: the version is eligible for the stage's clusters.
	Open bool
}

// VersionProgress is how far a version has gone through a sequence.
type VersionProgress struct {
	Version phases.Version
	Stages  []StageProgress
	// Reached is the number of stages done with the version (each done,
	// or skipped, with every stage before it): the stage it has reached.
	Reached int
}

// reachedAt is when the cluster first reached v (an upgrade to v or later
// that finished), and whether it runs v or later at all. A cluster that
// runs v with no such upgrade recorded reached it at the zero time.
func reachedAt(c *Cluster, v phases.Version) (time.Time, bool) {
	if c.Current.Less(v) {
		return time.Time{}, false
	}
	for _, u := range c.Past {
		if u.State == phases.UpgradeDone && !u.To.Less(v) && u.From.Less(v) {
			return u.FinishedAt, true
		}
	}
	if u := c.Upgrade; u != nil && u.State == phases.UpgradeDone && !u.To.Less(v) && u.From.Less(v) {
		return u.FinishedAt, true
	}
	return time.Time{}, true
}

// failedSince reports whether an upgrade of c to exactly v failed at or
// after since: one the sequence recorded, or c's last upgrade.
func failedSince(seq *Sequence, c *Cluster, v phases.Version, since time.Time) bool {
	for _, f := range seq.Failures {
		if f.Cluster == c.Name && f.Version == v && !f.At.Before(since) {
			return true
		}
	}
	u := c.Upgrade
	return u != nil && u.State == phases.UpgradeFailed && u.To == v && !u.FinishedAt.Before(since)
}

// sequences is the evaluator's view of the fleet's sequences: each
// cluster's place, each stage's members, and the progress of each
// (sequence, version) computed once per pass.
type sequences struct {
	f        *Fleet
	now      time.Time
	place    map[string]Place
	members  [][][]*Cluster
	progress map[seqVersion]*VersionProgress
}

type seqVersion struct {
	seq int
	v   phases.Version
}

func newSequences(f *Fleet, now time.Time) *sequences {
	s := &sequences{f: f, now: now, place: map[string]Place{}, progress: map[seqVersion]*VersionProgress{}}
	if len(f.Sequences) == 0 {
		return s
	}
	s.members = make([][][]*Cluster, len(f.Sequences))
	for i := range f.Sequences {
		s.members[i] = make([][]*Cluster, len(f.Sequences[i].Stages))
	}
	idx := newPlaceIndex(f.Sequences)
	for i := range f.Clusters {
		c := &f.Clusters[i]
		p, ok := idx.first(c.Name, c.Labels)
		if !ok {
			continue
		}
		s.place[c.Name] = p
		s.members[p.Sequence][p.Stage] = append(s.members[p.Sequence][p.Stage], c)
	}
	return s
}

// placeIndex finds a cluster's first place without walking every stage's
// list of names for every cluster (a pass over 1,000 clusters in 10
// sequences would otherwise scan each list a thousand times): the named
// clusters by name, and only the stages that have a selector.
type placeIndex struct {
	named     map[string]Place
	selectors []Place
	seqs      []Sequence
}

func newPlaceIndex(seqs []Sequence) *placeIndex {
	x := &placeIndex{named: map[string]Place{}, seqs: seqs}
	for i := range seqs {
		for j := range seqs[i].Stages {
			st := &seqs[i].Stages[j]
			for _, name := range st.Clusters {
				if _, ok := x.named[name]; !ok {
					x.named[name] = Place{Sequence: i, Stage: j}
				}
			}
			if len(st.Selector) > 0 {
				x.selectors = append(x.selectors, Place{Sequence: i, Stage: j})
			}
		}
	}
	return x
}

// first is the place Places would list first: the earliest stage, in
// sequence then stage order, that names or selects the cluster.
func (x *placeIndex) first(name string, labels map[string]string) (Place, bool) {
	best, found := x.named[name]
	for _, p := range x.selectors {
		if found && (p.Sequence > best.Sequence || p.Sequence == best.Sequence && p.Stage >= best.Stage) {
			break
		}
		if x.seqs[p.Sequence].Stages[p.Stage].Selects(name, labels) {
			return p, true
		}
	}
	return best, found
}

// of returns the progress of v through sequence i.
func (s *sequences) of(i int, v phases.Version) *VersionProgress {
	key := seqVersion{i, v}
	if p, ok := s.progress[key]; ok {
		return p
	}
	seq := &s.f.Sequences[i]
	p := &VersionProgress{Version: v, Stages: make([]StageProgress, len(seq.Stages))}
	open := true
	for k := range seq.Stages {
		sp := &p.Stages[k]
		sp.Name, sp.Open = seq.Stages[k].Name, open
		var resumed time.Time
		for _, o := range seq.Overrides {
			if o.Stage != k || o.Version != v {
				continue
			}
			switch o.Action {
			case OverrideSkip:
				sp.Skipped = true
			case OverrideResume:
				if o.At.After(resumed) {
					resumed = o.At
				}
			}
		}
		var last time.Time
		for _, c := range s.members[i][k] {
			sp.Clusters = append(sp.Clusters, c.Name)
			if at, ok := reachedAt(c, v); ok {
				sp.Reached = append(sp.Reached, c.Name)
				if at.After(last) {
					last = at
				}
			} else {
				sp.NotReached = append(sp.NotReached, c.Name)
			}
			if failedSince(seq, c, v, resumed) {
				sp.Failed = append(sp.Failed, c.Name)
			}
		}
		if len(sp.NotReached) == 0 {
			sp.ReachedAt = last
			if !last.IsZero() {
				sp.SoakEnds = last.Add(seq.Stages[k].Soak)
			}
		}
		sp.Held = len(sp.Failed) > 0 && !sp.Skipped
		sp.Done = open && len(sp.NotReached) == 0 && !s.now.Before(sp.SoakEnds) && len(sp.Failed) == 0
		// The next stage: open once this one is done; a skipped stage
		// passes on what it waited for.
		if !sp.Skipped {
			open = sp.Done
		}
		if open && p.Reached == k {
			p.Reached = k + 1
		}
	}
	s.progress[key] = p
	return p
}

// wait is where cluster c stands in its sequence for the step to v (nil:
// in no sequence).
func (s *sequences) wait(c *Cluster, v phases.Version) *SequenceWait {
	pl, ok := s.place[c.Name]
	if !ok {
		return nil
	}
	seq := &s.f.Sequences[pl.Sequence]
	w := &SequenceWait{Sequence: seq.Name, Stage: seq.Stages[pl.Stage].Name, StageIndex: pl.Stage, Version: v}
	p := s.of(pl.Sequence, v)
	if p.Stages[pl.Stage].Open {
		return w
	}
	// The stage it waits for: the nearest earlier one not skipped (it is
	// not done, or this stage would be open). When that one waits itself
	// because of a failure further back, the hold is named too.
	for k := pl.Stage - 1; k >= 0; k-- {
		sp := &p.Stages[k]
		if sp.Skipped {
			continue
		}
		w.WaitsFor, w.WaitsForIndex = sp.Name, k
		w.NotReached = slices.Clone(sp.NotReached)
		w.SoakEnds = sp.SoakEnds
		for j := k; j >= 0; j-- {
			if hp := &p.Stages[j]; hp.Held {
				w.Held, w.HeldStage, w.Failed = true, hp.Name, slices.Clone(hp.Failed)
				break
			}
		}
		break
	}
	return w
}

// sequenceHold: a cluster of a rollout sequence waits for the stages before
// its own to be done with the version of the step (not for a step forced
// by an end of support, which bypasses the sequence).
func (e *evaluator) sequenceHold(s *step) hold {
	w := e.seqs.wait(s.c, s.next)
	if w == nil {
		return hold{}
	}
	if s.forced {
		w.Bypassed = !w.Eligible()
		s.seq = w
		return hold{}
	}
	s.seq = w
	if w.Eligible() {
		return hold{}
	}
	b := Block{Kind: BlockSequence, Name: RuleSequenceStage}
	switch {
	case w.Held:
		b.Name = RuleSequenceHold
		b.Detail = fmt.Sprintf("sequence %s: the upgrade to %s failed on %s in stage %s; stage %s waits until an operator resumes or skips stage %s",
			w.Sequence, w.Version, strings.Join(w.Failed, ", "), w.HeldStage, w.Stage, w.HeldStage)
	case len(w.NotReached) > 0:
		b.Detail = fmt.Sprintf("sequence %s: stage %s waits for stage %s, where %s do(es) not run %s yet",
			w.Sequence, w.Stage, w.WaitsFor, strings.Join(w.NotReached, ", "), w.Version)
	default:
		b.Until = w.SoakEnds
		b.Detail = fmt.Sprintf("sequence %s: stage %s waits for stage %s to soak %s until %s",
			w.Sequence, w.Stage, w.WaitsFor, w.Version, w.SoakEnds.Format(time.RFC3339))
	}
	h := hold{state: StateWaitingForStage, blocks: []Block{b}}
	if !b.Until.IsZero() {
		h.notBefore = b.Until
	}
	return h
}

// SequenceGate is how the state machine re-checks a start decision: where
// the named cluster stands in its sequence for a step to v at now (nil: in
// no sequence). Only f's sequences and its clusters' names, labels,
// versions and upgrades are read.
func SequenceGate(f *Fleet, cluster string, v phases.Version, now time.Time) *SequenceWait {
	s := newSequences(f, now)
	for i := range f.Clusters {
		if f.Clusters[i].Name == cluster {
			return s.wait(&f.Clusters[i], v)
		}
	}
	return nil
}

// SequenceStatus is a sequence and how far each version has gone through
// it.
type SequenceStatus struct {
	Name     string
	Stages   []Stage
	Versions []VersionProgress
}

// SequenceProgress returns, for every sequence of f, how far each version
// in play has gone through it at now: the channel targets of its clusters
// and the next step of any of them (steps), newest first.
func SequenceProgress(f *Fleet, steps map[string]phases.Version, now time.Time) []SequenceStatus {
	s := newSequences(f, now)
	out := make([]SequenceStatus, 0, len(f.Sequences))
	for i := range f.Sequences {
		seq := &f.Sequences[i]
		st := SequenceStatus{Name: seq.Name, Stages: seq.Stages}
		vs := map[phases.Version]bool{}
		for _, stage := range s.membersOf(i) {
			for _, c := range stage {
				if ch, ok := f.Catalog.Channels[c.Channel]; ok && Subscribed(c.Channel) && !ch.Target.IsZero() {
					vs[ch.Target] = true
				}
				if v, ok := steps[c.Name]; ok && !v.IsZero() {
					vs[v] = true
				}
			}
		}
		for _, o := range seq.Overrides {
			vs[o.Version] = true
		}
		versions := slices.SortedFunc(maps.Keys(vs), func(a, b phases.Version) int { return b.Compare(a) })
		for _, v := range versions {
			st.Versions = append(st.Versions, *s.of(i, v))
		}
		out = append(out, st)
	}
	return out
}

func (s *sequences) membersOf(i int) [][]*Cluster {
	if s.members == nil {
		return nil
	}
	return s.members[i]
}
