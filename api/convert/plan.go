package convert

import (
	"fmt"
	"slices"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/phases"
)

// PlanToAPI renders a dry run's plan for the wire.
func PlanToAPI(p phases.Plan) api.Plan {
	return api.Plan{Cluster: p.Cluster, From: p.From.String(), To: p.To.String(), Start: p.Start, End: p.End,
		Steps: conv.Slice(p.Steps, plannedStepToAPI), Total: p.Total, CriticalPath: p.CriticalPath,
		Waits: conv.Slice(p.Waits, func(w phases.PlannedWait) api.PlannedWait {
			return api.PlannedWait{Start: w.Start, End: w.End, Step: w.Step, Target: string(w.Target)}
		}), WindowNeverOpens: p.WindowNeverOpens}
}

// PlanFromAPI reads a plan from the wire. It fails when a version is not
// "1.N.X".
func PlanFromAPI(p api.Plan) (phases.Plan, error) {
	var d fromAPI
	out := phases.Plan{Cluster: p.Cluster, From: d.version("from", p.From), To: d.version("to", p.To), Start: p.Start, End: p.End,
		Steps: conv.Slice(p.Steps, plannedStepFromAPI), Total: p.Total, CriticalPath: p.CriticalPath,
		Waits: conv.Slice(p.Waits, func(w api.PlannedWait) phases.PlannedWait {
			return phases.PlannedWait{Start: w.Start, End: w.End, Step: w.Step, Target: phases.Target(w.Target)}
		}), WindowNeverOpens: p.WindowNeverOpens}
	if d.err != nil {
		return phases.Plan{}, fmt.Errorf("plan of %s: %w", p.Cluster, d.err)
	}
	return out, nil
}

func plannedStepToAPI(s phases.PlannedStep) api.PlannedStep {
	return api.PlannedStep{ID: s.ID, Kind: api.StepKind(s.Kind), Pool: s.Pool, Role: api.Role(s.Role), Deps: slices.Clone(s.Deps),
		Start: s.Start, End: s.End, Batches: conv.Slice(s.Batches, batchToAPI), Disruption: s.Disruption,
		Strategy: s.Strategy, SizeRange: conv.Ptr(s.SizeRange, func(r phases.SizeRange) api.SizeRange { return api.SizeRange(r) }),
		Phases: conv.Slice(s.Phases, func(p phases.PlannedPhase) api.PlannedPhase {
			return api.PlannedPhase{Phase: string(p.Phase), Start: p.Start, End: p.End}
		}),
		Soak: conv.Ptr(s.Soak, func(k phases.PlannedSoak) api.PlannedSoak { return api.PlannedSoak(k) })}
}

func plannedStepFromAPI(s api.PlannedStep) phases.PlannedStep {
	return phases.PlannedStep{ID: s.ID, Kind: phases.StepKind(s.Kind), Pool: s.Pool, Role: phases.Role(s.Role), Deps: slices.Clone(s.Deps),
		Start: s.Start, End: s.End, Batches: conv.Slice(s.Batches, batchFromAPI), Disruption: s.Disruption,
		Strategy: s.Strategy, SizeRange: conv.Ptr(s.SizeRange, func(r api.SizeRange) phases.SizeRange { return phases.SizeRange(r) }),
		Phases: conv.Slice(s.Phases, func(p api.PlannedPhase) phases.PlannedPhase {
			return phases.PlannedPhase{Phase: phases.BlueGreenPhase(p.Phase), Start: p.Start, End: p.End}
		}),
		Soak: conv.Ptr(s.Soak, func(k api.PlannedSoak) phases.PlannedSoak { return phases.PlannedSoak(k) })}
}

func batchToAPI(b phases.Batch) api.Batch {
	return api.Batch{Index: b.Index, Nodes: slices.Clone(b.Nodes), Start: b.Start, End: b.End}
}

func batchFromAPI(b api.Batch) phases.Batch {
	return phases.Batch{Index: b.Index, Nodes: slices.Clone(b.Nodes), Start: b.Start, End: b.End}
}
