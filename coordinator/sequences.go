package coordinator

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/metrics"
	"github.com/moltproject/molt/phases"
)

// Rollout sequences (docs/rollout-sequences.md): the service side of
// /v1/rollout-sequences. The records and their rules are the state
// machine's (statemachine/sequences.go); what a version has done in each
// stage is never stored but read, at the member's clock, from the
// clusters' versions and histories (schedule.SequenceProgress).

// RuleSequenceSelector: a stage's selector is label pairs of Kubernetes
// label syntax.
const RuleSequenceSelector = "sequence-selector"

// RolloutSequences lists the stored sequences with each version's
// progress, by name.
func (c *Coordinator) RolloutSequences() []api.RolloutSequence {
	progress := c.sequenceProgress()
	out := []api.RolloutSequence{}
	for _, r := range c.sm.Sequences() {
		out = append(out, sequenceToAPI(r, progress[r.Name]))
	}
	return out
}

// RolloutSequence returns one stored sequence with each version's
// progress.
func (c *Coordinator) RolloutSequence(name string) (api.RolloutSequence, error) {
	r, err := c.sm.Sequence(name)
	if err != nil {
		return api.RolloutSequence{}, err
	}
	return sequenceToAPI(r, c.sequenceProgress()[name]), nil
}

func (c *Coordinator) sequenceProgress() map[string][]schedule.VersionProgress {
	out := map[string][]schedule.VersionProgress{}
	for _, st := range c.sm.SequenceProgress(c.cfg.AutoUpgradeLimits, c.cfg.Clock.Now()) {
		out[st.Name] = st.Versions
	}
	return out
}

func sequenceToAPI(r statemachine.SequenceRecord, versions []schedule.VersionProgress) api.RolloutSequence {
	out := api.RolloutSequence{Name: r.Name, UpdatedAt: r.UpdatedAt, Stages: make([]api.SequenceStage, 0, len(r.Stages))}
	for _, st := range r.Stages {
		s := api.SequenceStage{Name: st.Name, Clusters: st.Clusters, Selector: st.Selector}
		if st.Soak > 0 {
			s.Soak = convert.DurationToAPI(st.Soak)
		}
		out.Stages = append(out.Stages, s)
	}
	for _, o := range r.Overrides {
		out.Overrides = append(out.Overrides, api.SequenceOverride{Version: o.Version.String(), Stage: o.Stage, Action: o.Action, Reason: o.Reason, At: o.At})
	}
	for _, v := range versions {
		out.Versions = append(out.Versions, convert.SequenceVersionToAPI(v))
	}
	return out
}

// PutRolloutSequence stores (creates or replaces) a sequence. A refusal
// names its rule and changes nothing.
func (c *Coordinator) PutRolloutSequence(ctx context.Context, name string, spec api.RolloutSequenceSpec) error {
	cmd := statemachine.PutSequenceCmd{Name: name, Now: c.cfg.Clock.Now()}
	for i, st := range spec.Stages {
		rec := statemachine.StageRecord{Name: st.Name, Clusters: st.Clusters, Selector: st.Selector}
		if st.Soak != "" {
			soak, err := parseSoak(st.Soak)
			if err != nil {
				return &RuleError{Rule: statemachine.RuleSequenceStages, Detail: fmt.Sprintf("stage %d (%s): soak %s", i, st.Name, err), Err: ErrInvalid}
			}
			rec.Soak = soak
		}
		if err := validSelector(st.Name, st.Selector); err != nil {
			return err
		}
		cmd.Stages = append(cmd.Stages, rec)
	}
	if err := c.sm.Precheck(cmd); err != nil {
		return err
	}
	noteAudit(ctx, func(r *AuditRecord) {
		names := make([]string, 0, len(cmd.Stages))
		for _, st := range cmd.Stages {
			names = append(names, st.Name)
		}
		r.Detail = "rollout sequence " + name + ": " + strings.Join(names, " → ")
	})
	_, err := c.apply(ctx, cmd)
	return err
}

// DeleteRolloutSequence removes a sequence: its clusters are scheduled
// as clusters outside every sequence again.
func (c *Coordinator) DeleteRolloutSequence(ctx context.Context, name string) error {
	cmd := statemachine.PutSequenceCmd{Name: name, Delete: true, Now: c.cfg.Clock.Now()}
	if err := c.sm.Precheck(cmd); err != nil {
		return err
	}
	noteAudit(ctx, func(r *AuditRecord) { r.Detail = "rollout sequence " + name + " deleted" })
	_, err := c.apply(ctx, cmd)
	return err
}

// OverrideSequenceStage records an operator's resume or skip
// (schedule.OverrideResume, OverrideSkip) of a stage for a version.
func (c *Coordinator) OverrideSequenceStage(ctx context.Context, name, stage, action string, req api.SequenceOverrideRequest) error {
	if action != schedule.OverrideResume && action != schedule.OverrideSkip {
		return &RuleError{Rule: statemachine.RuleSequenceOverride, Detail: fmt.Sprintf("action %q is not resume or skip", action), Err: ErrInvalid}
	}
	v, err := phases.ParseVersion(req.Version)
	if err != nil {
		return &RuleError{Rule: statemachine.RuleSequenceOverride, Detail: "version: " + err.Error(), Err: ErrInvalid}
	}
	cmd := statemachine.SequenceOverrideCmd{Sequence: name, Stage: stage, Version: v, Action: action, Reason: req.Reason, Now: c.cfg.Clock.Now()}
	if err := c.sm.Precheck(cmd); err != nil {
		return err
	}
	noteAudit(ctx, func(r *AuditRecord) {
		r.Detail = fmt.Sprintf("rollout sequence %s: %s stage %s for %s", name, action, stage, v)
		r.Reason = req.Reason
	})
	_, err = c.apply(ctx, cmd)
	return err
}

// parseSoak reads a soak as the wire writes durations ("259200s"), or any
// Go duration of whole seconds ("72h"); the state machine bounds it.
func parseSoak(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d%time.Second != 0 {
		return 0, fmt.Errorf("%q is not a duration of whole seconds such as \"259200s\" or \"72h\"", s)
	}
	return d, nil
}

// Label syntax as Kubernetes has it: a key is an optional DNS-subdomain
// prefix and '/', then a name of at most 63 alphanumerics, '-', '_' and
// '.', starting and ending alphanumeric; a value is such a name or empty.
var (
	labelNameRE   = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelPrefixRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

func validSelector(stage string, sel map[string]string) error {
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name, prefix := k, ""
		if i := strings.LastIndexByte(k, '/'); i >= 0 {
			prefix, name = k[:i], k[i+1:]
			if len(prefix) > 253 || !labelPrefixRE.MatchString(prefix) {
				return selectorError(stage, "label key %q: the prefix before '/' is not a DNS subdomain", k)
			}
		}
		if !labelNameRE.MatchString(name) {
			return selectorError(stage, "label key %q is not 1-63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit (after an optional prefix/)", k)
		}
		if v := sel[k]; v != "" && !labelNameRE.MatchString(v) {
			return selectorError(stage, "label %s: value %q is not empty or 1-63 letters, digits, '-', '_' or '.' starting and ending with a letter or digit", k, v)
		}
	}
	return nil
}

func selectorError(stage, format string, a ...any) error {
	return &RuleError{Rule: RuleSequenceSelector, Detail: fmt.Sprintf("stage %s: ", stage) + fmt.Sprintf(format, a...), Err: ErrInvalid}
}

// SequencesView is every version in play in every rollout sequence, for
// the metrics: the stage it reached, whether a failure holds it, when the
// soak of the stage it waits in ends.
func (c *Coordinator) SequencesView() []metrics.SequenceView {
	var out []metrics.SequenceView
	for _, st := range c.sm.SequenceProgress(c.cfg.AutoUpgradeLimits, c.cfg.Clock.Now()) {
		for _, p := range st.Versions {
			v := metrics.SequenceView{Sequence: st.Name, Version: p.Version.String(), Reached: p.Reached}
			if p.Reached < len(p.Stages) {
				// The stages before it are done or skipped (a skipped
				// stage is never held): only this one can hold.
				at := &p.Stages[p.Reached]
				v.SoakEnds, v.Held = at.SoakEnds, at.Held
			}
			out = append(out, v)
		}
	}
	return out
}

// PlanRolloutSequence is the dry run of version through the named
// sequence at the member's clock, each cluster's duration its upgrade's
// forecast, its last upgrade's, or the plan of an automatic upgrade.
func (c *Coordinator) PlanRolloutSequence(name, version string) (api.SequencePlan, error) {
	v, err := phases.ParseVersion(version)
	if err != nil {
		return api.SequencePlan{}, &RuleError{Rule: phases.RuleInvalid, Detail: "version: " + err.Error(), Err: ErrInvalid}
	}
	opts := c.upgradeOptions(api.UpgradeRequest{Automatic: true})
	p, err := c.sm.PlanSequence(name, v, c.cfg.AutoUpgradeLimits, phases.DefaultDurations(), opts, c.cfg.Clock.Now())
	if err != nil {
		return api.SequencePlan{}, err
	}
	out := api.SequencePlan{Sequence: p.Sequence, Version: p.Version.String(), Finish: p.Finish, Stopped: p.Stopped,
		Stages: make([]api.PlannedStage, 0, len(p.Stages)), Clusters: make([]api.PlannedSeqCluster, 0, len(p.Clusters))}
	for _, st := range p.Stages {
		out.Stages = append(out.Stages, api.PlannedStage{Name: st.Name, Opens: st.Opens, Done: st.Done, SoakEnds: st.SoakEnds, Held: st.Held})
	}
	for _, pc := range p.Clusters {
		out.Clusters = append(out.Clusters, api.PlannedSeqCluster{Cluster: pc.Cluster, Stage: pc.Stage, From: pc.From.String(), Start: pc.Start, Finish: pc.Finish,
			Already: pc.Already, Running: pc.Running, Unplanned: pc.Unplanned, OutlastsWindow: pc.OutlastsWindow})
	}
	return out, nil
}
