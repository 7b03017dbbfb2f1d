package schedule

import (
	"fmt"
	"time"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// The plan of a rollout sequence: a dry run that lays a version over every
// stage's clusters in order. A stage opens when the one before it is done
// and soaked (the first at now); each of its clusters that does not run
// the version yet starts at its own next opportunity from then (its
// window and exclusions, its backoff and registration hold) and takes the
// duration given for it; the stage is done when its last cluster is, and
// the next opens after its soak. A cluster running the version already
// counts as done when it reached it; one upgrading to it now finishes
// after the duration given for it (its time left). The plan does not
// model an upgrade that outlasts its window and pauses, the concurrency
// limits, or failures; a stage held by a failure stops the plan there.

// PlannedCluster is one cluster's place in a sequence's plan.
type PlannedCluster struct {
	Cluster    string
	Stage      string
	StageIndex int
	From       phases.Version
	// Start and Finish are the predicted start and end of its upgrade to
	// the version; for a cluster that runs it already both are when it
	// reached it (zero: before any recorded upgrade).
	Start, Finish time.Time
	// Already: it runs the version (or a later one) already.
	Already bool
	// Running: its upgrade to the version is in progress.
	Running bool
	// Unplanned says why no start could be predicted (its policy offers
	// no opportunity); empty when planned.
	Unplanned string
	// OutlastsWindow: the window it starts in closes before Finish. The
	// upgrade will pause at a safe point and go on in the next window, so
	// it finishes later than Finish (the plan does not model the pause).
	OutlastsWindow bool
}

// PlannedStage is one stage's predicted course.
type PlannedStage struct {
	Name string
	// Opens is when the version becomes eligible for its clusters.
	Opens time.Time
	// Done is when its last cluster is predicted to run the version, and
	// SoakEnds when the next stage opens.
	Done     time.Time
	SoakEnds time.Time
	// Held: a failure holds the stages after it; the plan stops here.
	Held bool
}

// SequencePlan is the dry run of a version through a sequence.
type SequencePlan struct {
	Sequence string
	Version  phases.Version
	Stages   []PlannedStage
	Clusters []PlannedCluster
	// Finish is when the last cluster of the last stage is predicted to
	// run the version (zero when the plan stops at a held stage or a
	// cluster without an opportunity).
	Finish time.Time
	// Stopped says why Finish is unknown.
	Stopped string
}

// PlanSequence plans version v through the sequence named seq at now.
// durations gives each cluster's predicted upgrade duration (for one whose
// upgrade to v is in progress, the time it has left); a cluster without
// one takes DefaultPlanDuration. ok is false when f has no such sequence.
func PlanSequence(f *Fleet, seq string, v phases.Version, durations map[string]time.Duration, now time.Time) (SequencePlan, bool) {
	now = now.UTC()
	s := newSequences(f, now)
	i := -1
	for j := range f.Sequences {
		if f.Sequences[j].Name == seq {
			i = j
		}
	}
	if i < 0 {
		return SequencePlan{}, false
	}
	sq := &f.Sequences[i]
	prog := s.of(i, v)
	plan := SequencePlan{Sequence: seq, Version: v}
	opens := now
	for k := range sq.Stages {
		st := PlannedStage{Name: sq.Stages[k].Name, Opens: opens}
		if prog.Stages[k].Open && opens.Before(now) {
			st.Opens = now
		}
		var done time.Time
		for _, c := range s.membersOf(i)[k] {
			pc := PlannedCluster{Cluster: c.Name, Stage: st.Name, StageIndex: k, From: c.Current}
			dur, ok := durations[c.Name]
			if !ok {
				dur = DefaultPlanDuration
			}
			switch at, reached := reachedAt(c, v); {
			case reached:
				pc.Already, pc.Start, pc.Finish = true, at, at
			case c.Upgrade.InProgress() && c.Upgrade.To == v:
				pc.Running, pc.Start, pc.Finish = true, now, now.Add(dur)
			default:
				from := latest(st.Opens, c.Auto.NextAttempt)
				from = latest(from, c.Auto.HeldUntil)
				start, ok := planOpportunity(c, KindOf(c.Current, v), from)
				if !ok {
					pc.Unplanned = "its maintenance policy offers no opportunity"
					if plan.Stopped == "" {
						plan.Stopped = fmt.Sprintf("cluster %s: %s", c.Name, pc.Unplanned)
					}
					break
				}
				pc.Start, pc.Finish = start, start.Add(dur)
				pc.OutlastsWindow = outlasts(c, start, pc.Finish)
			}
			done = latest(done, pc.Finish)
			plan.Clusters = append(plan.Clusters, pc)
		}
		st.Done = latest(done, st.Opens)
		if prog.Stages[k].Skipped {
			// The next stage waits for what this one waited for.
			st.SoakEnds = st.Opens
		} else {
			st.SoakEnds = st.Done.Add(sq.Stages[k].Soak)
		}
		if prog.Stages[k].Held {
			st.Held = true
			if plan.Stopped == "" {
				plan.Stopped = fmt.Sprintf("stage %s is held by a failed upgrade to %s until an operator resumes or skips it", st.Name, v)
			}
		}
		plan.Stages = append(plan.Stages, st)
		if st.Held {
			break
		}
		opens = st.SoakEnds
		plan.Finish = latest(plan.Finish, st.Done)
	}
	if plan.Stopped != "" {
		plan.Finish = time.Time{}
	}
	return plan, true
}

// DefaultPlanDuration is a cluster's upgrade duration in a sequence's plan
// when none is given.
const DefaultPlanDuration = 2 * time.Hour

// planOpportunity is the earliest instant at or after from when an
// automatic change of kind may start on c as far as its policy tells.
func planOpportunity(c *Cluster, kind maintenance.ChangeKind, from time.Time) (time.Time, bool) {
	if c.PolicyInvalid {
		return time.Time{}, false
	}
	if c.Policy == nil {
		return from, true
	}
	return c.Policy.NextOpportunity(Change(kind), from)
}

// outlasts reports whether c's window closes between start and finish.
func outlasts(c *Cluster, start, finish time.Time) bool {
	if c.Policy == nil {
		return false
	}
	st := c.Policy.WindowStretches(start, finish)
	return len(st) == 0 || !st[0].Start.Equal(start) || st[0].End.Before(finish)
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
