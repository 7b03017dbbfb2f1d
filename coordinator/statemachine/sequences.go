package statemachine

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore/command"
)

// Rollout sequences (docs/rollout-sequences.md): ordered stages of
// clusters with a soak after each; the scheduler (maintenance/schedule,
// sequence.go) lets a version into a stage only once the stage before it
// is done with it. The records here are the sequences an admin stored
// (CmdPutSequence) and the resumes and skips operators recorded
// (CmdSequenceOverride); the progress of a version is never stored, it is
// read from the clusters' versions and upgrade histories.

// SinceSequences is the release that introduced CmdPutSequence and
// CmdSequenceOverride.
const SinceSequences = "0.2.0"

// SequenceRecord is a stored rollout sequence.
type SequenceRecord struct {
	Name   string
	Stages []StageRecord
	// Overrides are operators' resumes and skips, oldest first.
	Overrides []OverrideRecord
	// Failures are the failed upgrades of its clusters, oldest first
	// (recorded by the entry that ends the upgrade failed: a cluster's
	// history keeps only the upgrades that finished).
	Failures  []FailureRecord
	UpdatedAt time.Time
}

// FailureRecord is a failed upgrade of a cluster of a sequence.
type FailureRecord struct {
	Cluster string
	Upgrade string
	Version phases.Version
	At      time.Time
}

// StageRecord is a stage of a sequence: the clusters named, those whose
// labels carry every pair of Selector, and the soak after it.
type StageRecord struct {
	Name     string
	Clusters []string
	Selector map[string]string
	Soak     time.Duration
}

// OverrideRecord is an operator's resume or skip of a stage for a
// version (schedule.OverrideResume, OverrideSkip).
type OverrideRecord struct {
	Version phases.Version
	Stage   string
	Action  string
	Reason  string
	At      time.Time
}

// PutSequenceCmd (CmdPutSequence) stores a rollout sequence, or with
// Delete removes it. Storing replaces the stages and keeps the overrides
// of the stages that keep their names.
type PutSequenceCmd struct {
	Name   string
	Stages []StageRecord
	Delete bool
	Now    time.Time
}

// SequenceOverrideCmd (CmdSequenceOverride) records an operator's resume
// or skip of a stage of a sequence for a version.
type SequenceOverrideCmd struct {
	Sequence string
	Stage    string
	Version  phases.Version
	Action   string
	Reason   string
	Now      time.Time
}

func (PutSequenceCmd) Type() command.Type      { return CmdPutSequence }
func (SequenceOverrideCmd) Type() command.Type { return CmdSequenceOverride }

// Sequence rules.
const (
	RuleSequenceName = "sequence-name"
	// RuleSequenceStages: at least one stage, at most MaxStages, each
	// named once, each with clusters or a selector, soaks within
	// MaxSoak.
	RuleSequenceStages = "sequence-stages"
	// RuleClusterInTwoStages: a cluster is in at most one stage of a
	// sequence.
	RuleClusterInTwoStages = "cluster-in-two-stages"
	// RuleClusterInTwoSequences: a cluster is in at most one sequence.
	RuleClusterInTwoSequences = "cluster-in-two-sequences"
	// RuleSequenceStageUnknown: an override names a stage the sequence
	// does not have.
	RuleSequenceStageUnknown = "sequence-stage-unknown"
	// RuleSequenceOverride: an override's action is resume or skip, for a
	// version of the catalog.
	RuleSequenceOverride = "sequence-override"
)

// Bounds of a sequence.
const (
	MaxStages = 16
	MaxSoak   = 90 * 24 * time.Hour
)

var sequenceNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func (s *state) putSequence(c PutSequenceCmd) (any, error) {
	if c.Delete {
		if _, ok := s.Sequences[c.Name]; !ok {
			return nil, fmt.Errorf("rollout sequence %q: %w", c.Name, ErrNotFound)
		}
		delete(s.Sequences, c.Name)
		return nil, nil
	}
	if !sequenceNameRE.MatchString(c.Name) {
		return nil, &RuleError{Rule: RuleSequenceName, Detail: fmt.Sprintf("%q is not a name of lower-case letters, digits and '-', at most 63", c.Name), Err: ErrInvalid}
	}
	if err := validStages(c.Stages); err != nil {
		return nil, err
	}
	rec := &SequenceRecord{Name: c.Name, Stages: cloneStages(c.Stages), UpdatedAt: c.Now}
	if old := s.Sequences[c.Name]; old != nil {
		rec.Failures = slices.Clone(old.Failures)
		for _, o := range old.Overrides {
			if slices.ContainsFunc(rec.Stages, func(st StageRecord) bool { return st.Name == o.Stage }) {
				rec.Overrides = append(rec.Overrides, o)
			}
		}
	}
	next := maps.Clone(s.Sequences)
	if next == nil {
		next = map[string]*SequenceRecord{}
	}
	next[c.Name] = rec
	if err := s.oneSequenceEach(next, c.Name); err != nil {
		return nil, err
	}
	s.Sequences = next
	return nil, nil
}

func validStages(stages []StageRecord) error {
	bad := func(format string, a ...any) error {
		return &RuleError{Rule: RuleSequenceStages, Detail: fmt.Sprintf(format, a...), Err: ErrInvalid}
	}
	if len(stages) == 0 || len(stages) > MaxStages {
		return bad("a sequence has 1 to %d stages, not %d", MaxStages, len(stages))
	}
	names := map[string]bool{}
	where := map[string]string{}
	for _, st := range stages {
		switch {
		case !sequenceNameRE.MatchString(st.Name):
			return bad("stage name %q is not lower-case letters, digits and '-', at most 63", st.Name)
		case names[st.Name]:
			return bad("stage %s is named twice", st.Name)
		case len(st.Clusters) == 0 && len(st.Selector) == 0:
			return bad("stage %s names no cluster and has no selector", st.Name)
		case st.Soak < 0 || st.Soak > MaxSoak:
			return bad("stage %s: a soak is between 0 and %s, not %s", st.Name, MaxSoak, st.Soak)
		}
		names[st.Name] = true
		for k := range st.Selector {
			if k == "" {
				return bad("stage %s: a selector's label key is not empty", st.Name)
			}
		}
		for _, cl := range st.Clusters {
			if cl == "" {
				return bad("stage %s names an empty cluster", st.Name)
			}
			if other, ok := where[cl]; ok {
				return &RuleError{Rule: RuleClusterInTwoStages, Detail: fmt.Sprintf("cluster %s is named in stages %s and %s; a cluster is in at most one stage", cl, other, st.Name), Err: ErrInvalid}
			}
			where[cl] = st.Name
		}
	}
	return nil
}

// oneSequenceEach refuses sequences (those of changed, the one being
// stored) that would put a cluster — registered, or named by a stage — in
// two stages or two sequences.
func (s *state) oneSequenceEach(seqs map[string]*SequenceRecord, changed string) error {
	all := scheduleSequences(seqs)
	check := func(name string, labels map[string]string) error {
		ps := schedule.Places(all, name, labels)
		if len(ps) < 2 {
			return nil
		}
		var at []string
		for _, p := range ps {
			at = append(at, fmt.Sprintf("%s/%s", all[p.Sequence].Name, all[p.Sequence].Stages[p.Stage].Name))
		}
		rule := RuleClusterInTwoSequences
		if ps[0].Sequence == ps[1].Sequence {
			rule = RuleClusterInTwoStages
		}
		return &RuleError{Rule: rule, Detail: fmt.Sprintf("cluster %s would be in %s; a cluster is in at most one stage of one sequence (sequence %s)", name, strings.Join(at, " and "), changed), Err: ErrInvalid}
	}
	for _, name := range sortedKeys(s.Clusters) {
		if err := check(name, s.Clusters[name].Spec.Labels); err != nil {
			return err
		}
	}
	for _, st := range seqs[changed].Stages {
		for _, cl := range st.Clusters {
			if _, ok := s.Clusters[cl]; !ok {
				if err := check(cl, nil); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// clusterPlaces refuses a cluster spec that the stored sequences would put
// in two stages or two sequences (putCluster).
func (s *state) clusterPlaces(spec *phases.ClusterSpec) error {
	if len(s.Sequences) == 0 {
		return nil
	}
	all := scheduleSequences(s.Sequences)
	ps := schedule.Places(all, spec.Name, spec.Labels)
	if len(ps) < 2 {
		return nil
	}
	var at []string
	for _, p := range ps {
		at = append(at, fmt.Sprintf("%s/%s", all[p.Sequence].Name, all[p.Sequence].Stages[p.Stage].Name))
	}
	rule := RuleClusterInTwoSequences
	if ps[0].Sequence == ps[1].Sequence {
		rule = RuleClusterInTwoStages
	}
	return &RuleError{Rule: rule, Detail: fmt.Sprintf("cluster %s would be in %s; a cluster is in at most one stage of one sequence", spec.Name, strings.Join(at, " and ")), Err: ErrInvalid}
}

func (s *state) sequenceOverride(c SequenceOverrideCmd) (any, error) {
	rec := s.Sequences[c.Sequence]
	if rec == nil {
		return nil, fmt.Errorf("rollout sequence %q: %w", c.Sequence, ErrNotFound)
	}
	if !slices.ContainsFunc(rec.Stages, func(st StageRecord) bool { return st.Name == c.Stage }) {
		return nil, &RuleError{Rule: RuleSequenceStageUnknown, Detail: fmt.Sprintf("sequence %s has no stage %q", c.Sequence, c.Stage), Err: ErrInvalid}
	}
	if c.Action != schedule.OverrideResume && c.Action != schedule.OverrideSkip {
		return nil, &RuleError{Rule: RuleSequenceOverride, Detail: fmt.Sprintf("action %q is not resume or skip", c.Action), Err: ErrInvalid}
	}
	if _, ok := s.Releases[c.Version.String()]; c.Version.IsZero() || !ok {
		return nil, &RuleError{Rule: RuleSequenceOverride, Detail: fmt.Sprintf("version %s is not in the release catalog", c.Version), Err: ErrUnknownVersion}
	}
	rec.Overrides = append(rec.Overrides, OverrideRecord{Version: c.Version, Stage: c.Stage, Action: c.Action, Reason: c.Reason, At: c.Now})
	return nil, nil
}

func cloneStages(in []StageRecord) []StageRecord {
	out := make([]StageRecord, len(in))
	for i, st := range in {
		out[i] = StageRecord{Name: st.Name, Clusters: slices.Clone(st.Clusters), Selector: maps.Clone(st.Selector), Soak: st.Soak}
	}
	return out
}

func cloneSequence(r *SequenceRecord) SequenceRecord {
	return SequenceRecord{Name: r.Name, Stages: cloneStages(r.Stages), Overrides: slices.Clone(r.Overrides), Failures: slices.Clone(r.Failures), UpdatedAt: r.UpdatedAt}
}

// scheduleSequences is what the scheduler reads of the stored sequences,
// by name.
func scheduleSequences(m map[string]*SequenceRecord) []schedule.Sequence {
	out := make([]schedule.Sequence, 0, len(m))
	for _, name := range sortedKeys(m) {
		r := m[name]
		seq := schedule.Sequence{Name: r.Name}
		idx := map[string]int{}
		for i, st := range r.Stages {
			idx[st.Name] = i
			seq.Stages = append(seq.Stages, schedule.Stage{Name: st.Name, Clusters: st.Clusters, Selector: st.Selector, Soak: st.Soak})
		}
		for _, o := range r.Overrides {
			if i, ok := idx[o.Stage]; ok {
				seq.Overrides = append(seq.Overrides, schedule.Override{Version: o.Version, Stage: i, Action: o.Action, At: o.At})
			}
		}
		for _, fl := range r.Failures {
			seq.Failures = append(seq.Failures, schedule.Failure{Cluster: fl.Cluster, Version: fl.Version, At: fl.At})
		}
		out = append(out, seq)
	}
	return out
}

// sequenceFailure records the failed upgrade u in the sequence that holds
// its cluster (advance, when u ends failed). Only a state with sequences
// changes, and only members that read CmdPutSequence can have one, so a
// member of an older release applies the same entry to the same state.
func (s *state) sequenceFailure(r *ClusterRecord, u *phases.Upgrade, now time.Time) {
	if len(s.Sequences) == 0 {
		return
	}
	all := scheduleSequences(s.Sequences)
	ps := schedule.Places(all, r.Spec.Name, r.Spec.Labels)
	if len(ps) == 0 {
		return
	}
	rec := s.Sequences[all[ps[0].Sequence].Name]
	rec.Failures = append(rec.Failures, FailureRecord{Cluster: r.Spec.Name, Upgrade: u.ID, Version: u.To, At: now})
}

// pastUpgrades is what the scheduler reads of a cluster's ended upgrades.
func pastUpgrades(r *ClusterRecord) []schedule.Upgrade {
	out := make([]schedule.Upgrade, 0, len(r.History))
	for _, h := range r.History {
		from, _ := phases.ParseVersion(h.From)
		to, _ := phases.ParseVersion(h.To)
		out = append(out, schedule.Upgrade{ID: h.ID, From: from, To: to, State: phases.UpgradeState(h.State), FinishedAt: h.FinishedAt})
	}
	return out
}

// checkSequence refuses a start decision its cluster's rollout sequence
// does not allow on this state (autoStart): the stage before the
// cluster's has not reached the version, not soaked, or is held.
func (s *state) checkSequence(r *ClusterRecord, to phases.Version, now time.Time) error {
	if len(s.Sequences) == 0 {
		return nil
	}
	f := &schedule.Fleet{Sequences: scheduleSequences(s.Sequences)}
	for _, name := range sortedKeys(s.Clusters) {
		o := s.Clusters[name]
		f.Clusters = append(f.Clusters, schedule.Cluster{Name: name, Labels: o.Spec.Labels, Current: o.StatusVersion,
			Upgrade: upgradeInfo(o.Upgrade), Past: pastUpgrades(o)})
	}
	w := schedule.SequenceGate(f, r.Spec.Name, to, now)
	if w.Eligible() {
		return nil
	}
	return fmt.Errorf("cluster %s: sequence %s: stage %s waits for stage %s with %s: %w", r.Spec.Name, w.Sequence, w.Stage, w.WaitsFor, to, phases.ErrStale)
}

// Sequences returns the stored rollout sequences by name.
func (f *Machine) Sequences() []SequenceRecord {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]SequenceRecord, 0, len(f.st.Sequences))
	for _, name := range sortedKeys(f.st.Sequences) {
		out = append(out, cloneSequence(f.st.Sequences[name]))
	}
	return out
}

// Sequence returns the named rollout sequence.
func (f *Machine) Sequence(name string) (SequenceRecord, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r := f.st.Sequences[name]
	if r == nil {
		return SequenceRecord{}, fmt.Errorf("rollout sequence %q: %w", name, ErrNotFound)
	}
	return cloneSequence(r), nil
}

// PlanSequence is the dry run of version v through the named sequence at
// now, with the scheduler's reading of this state (limits as given). Each
// cluster's duration is its upgrade's own forecast when it is upgrading
// to v, else the duration of its last upgrade that finished (from its
// start, preflight included, to its end), else the plan of the upgrade
// with def and opts (phases.MakePlan).
func (f *Machine) PlanSequence(name string, v phases.Version, limits schedule.Limits, def phases.Durations, opts phases.Options, now time.Time) (schedule.SequencePlan, error) {
	fleet := f.SchedulerFleet(limits)
	durations := f.planDurations(v, def, opts, now)
	plan, ok := schedule.PlanSequence(fleet, name, v, durations, now)
	if !ok {
		return schedule.SequencePlan{}, fmt.Errorf("rollout sequence %q: %w", name, ErrNotFound)
	}
	return plan, nil
}

func (f *Machine) planDurations(v phases.Version, def phases.Durations, opts phases.Options, now time.Time) map[string]time.Duration {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]time.Duration, len(f.st.Clusters))
	for name, r := range f.st.Clusters {
		if u := r.Upgrade; u != nil && u.InProgress() && u.To == v {
			if end, ok := phases.Forecast(u, phases.ObservedDurations(u, def), now); ok && end.After(now) {
				out[name] = end.Sub(now)
			}
			continue
		}
		if d, ok := lastDuration(r); ok {
			out[name] = d
			continue
		}
		p := phases.MakePlan(&r.Spec, v, opts, def, now)
		out[name] = p.End.Sub(p.Start)
	}
	return out
}

// lastDuration is how long the cluster's last finished upgrade took.
func lastDuration(r *ClusterRecord) (time.Duration, bool) {
	if u := r.Upgrade; u != nil && u.State == phases.UpgradeDone && !u.FinishedAt.IsZero() {
		return u.FinishedAt.Sub(u.CreatedAt), true
	}
	for i := len(r.History) - 1; i >= 0; i-- {
		if h := r.History[i]; h.State == api.UpgradeState(phases.UpgradeDone) && !h.FinishedAt.IsZero() {
			return h.FinishedAt.Sub(h.CreatedAt), true
		}
	}
	return 0, false
}

// SequenceProgress is how far each version in play has gone through every
// sequence at now (schedule.SequenceProgress): the channels' targets and
// each cluster's next step as the scheduler decides them on this state.
func (f *Machine) SequenceProgress(limits schedule.Limits, now time.Time) []schedule.SequenceStatus {
	fleet := f.SchedulerFleet(limits)
	if len(fleet.Sequences) == 0 {
		return nil
	}
	steps := map[string]phases.Version{}
	for _, d := range schedule.Evaluate(fleet, now).Decisions {
		if !d.Status.Next.IsZero() {
			steps[d.Cluster] = d.Status.Next
		}
	}
	return schedule.SequenceProgress(fleet, steps, now)
}
