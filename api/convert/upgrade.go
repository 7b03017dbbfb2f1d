package convert

import (
	"fmt"
	"slices"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/phases"
)

// UpgradeToAPI renders an upgrade for the wire; nil stays nil.
func UpgradeToAPI(u *phases.Upgrade) *api.Upgrade {
	if u == nil {
		return nil
	}
	return &api.Upgrade{
		ID: u.ID, Cluster: u.Cluster, From: u.From.String(), To: u.To.String(),
		Options: api.UpgradeOptions(u.Options), State: UpgradeStateToAPI(u.State),
		CreatedAt: u.CreatedAt, FinishedAt: u.FinishedAt,
		PauseReason: u.PauseReason, PausedAt: u.PausedAt, ResumedAt: u.ResumedAt,
		Preflight: u.Preflight, RefusedChecks: slices.Clone(u.RefusedChecks),
		Steps: conv.Slice(u.Steps, stepToAPI), Pools: conv.Slice(u.Pools, poolTrackToAPI), Nodes: conv.Slice(u.Nodes, nodeTaskToAPI),
		Revision: u.Revision,
	}
}

// UpgradeFromAPI reads an upgrade from the wire, with its lookup indexes
// built; nil stays nil. It fails when a version is not "1.N.X".
func UpgradeFromAPI(u *api.Upgrade) (*phases.Upgrade, error) {
	if u == nil {
		return nil, nil
	}
	var d fromAPI
	out := &phases.Upgrade{
		ID: u.ID, Cluster: u.Cluster, From: d.version("from", u.From), To: d.version("to", u.To),
		Options: phases.Options(u.Options), State: phases.UpgradeState(u.State),
		CreatedAt: u.CreatedAt, FinishedAt: u.FinishedAt,
		PauseReason: u.PauseReason, PausedAt: u.PausedAt, ResumedAt: u.ResumedAt,
		Preflight: u.Preflight, RefusedChecks: slices.Clone(u.RefusedChecks),
		Steps: conv.Slice(u.Steps, stepFromAPI), Pools: conv.Slice(u.Pools, poolTrackFromAPI),
		Nodes: conv.Slice(u.Nodes, func(n api.NodeTask) phases.NodeTask {
			return nodeTaskFromAPI(&d, n)
		}),
		Revision: u.Revision,
	}
	if d.err != nil {
		return nil, fmt.Errorf("upgrade %s: %w", u.ID, d.err)
	}
	out.BuildIndex()
	return out, nil
}

// UpgradeStateToAPI renders an upgrade's state for the wire.
func UpgradeStateToAPI(s phases.UpgradeState) api.UpgradeState { return api.UpgradeState(s) }

func stepToAPI(s phases.Step) api.Step {
	return api.Step{ID: s.ID, Kind: api.StepKind(s.Kind), Pool: s.Pool, Role: api.Role(s.Role), Deps: slices.Clone(s.Deps),
		State: api.StepState(s.State), StartedAt: s.StartedAt, FinishedAt: s.FinishedAt, Attempts: s.Attempts, Message: s.Message}
}

func stepFromAPI(s api.Step) phases.Step {
	return phases.Step{ID: s.ID, Kind: phases.StepKind(s.Kind), Pool: s.Pool, Role: phases.Role(s.Role), Deps: slices.Clone(s.Deps),
		State: phases.State(s.State), StartedAt: s.StartedAt, FinishedAt: s.FinishedAt, Attempts: s.Attempts, Message: s.Message}
}

func poolTrackToAPI(p phases.PoolTrack) api.PoolTrack {
	return api.PoolTrack{Name: p.Name, Role: api.Role(p.Role), NodeSteps: conv.Slice(p.NodeSteps, nodeStepToAPI),
		Concurrency: p.Concurrency, MinAvailable: p.MinAvailable, Cancelled: p.Cancelled, First: p.First, Count: p.Count}
}

func poolTrackFromAPI(p api.PoolTrack) phases.PoolTrack {
	return phases.PoolTrack{Name: p.Name, Role: phases.Role(p.Role), NodeSteps: conv.Slice(p.NodeSteps, nodeStepFromAPI),
		Concurrency: p.Concurrency, MinAvailable: p.MinAvailable, Cancelled: p.Cancelled, First: p.First, Count: p.Count}
}

func nodeStepToAPI(s phases.NodeStep) api.NodeStep {
	return api.NodeStep{Kind: api.NodeStepKind(s.Kind), Op: conv.Ptr(s.Op, func(o phases.OpSpec) api.OpSpec {
		return api.OpSpec{Kind: api.OperationKind(o.Kind), Component: o.Component}
	})}
}

func nodeStepFromAPI(s api.NodeStep) phases.NodeStep {
	return phases.NodeStep{Kind: phases.NodeStepKind(s.Kind), Op: conv.Ptr(s.Op, func(o api.OpSpec) phases.OpSpec {
		return phases.OpSpec{Kind: phases.OpKind(o.Kind), Component: o.Component}
	})}
}

func nodeTaskToAPI(n phases.NodeTask) api.NodeTask {
	return api.NodeTask{Node: n.Node, Pool: n.Pool, State: api.StepState(n.State), Cursor: n.Cursor, Attempt: n.Attempt,
		Version: n.Version.String(), StartedAt: n.StartedAt, StepStartedAt: n.StepStartedAt, FinishedAt: n.FinishedAt,
		ProtectedUntil: n.ProtectedUntil, LeftBehind: conv.Slice(n.LeftBehind, leftPodToAPI), Error: n.Error}
}

func nodeTaskFromAPI(d *fromAPI, n api.NodeTask) phases.NodeTask {
	return phases.NodeTask{Node: n.Node, Pool: n.Pool, State: phases.State(n.State), Cursor: n.Cursor, Attempt: n.Attempt,
		Version: d.version("node "+n.Node+": version", n.Version), StartedAt: n.StartedAt, StepStartedAt: n.StepStartedAt,
		FinishedAt: n.FinishedAt, ProtectedUntil: n.ProtectedUntil, LeftBehind: conv.Slice(n.LeftBehind, leftPodFromAPI), Error: n.Error}
}

func leftPodToAPI(p phases.LeftPod) api.LeftPod {
	return api.LeftPod{Namespace: p.Namespace, Name: p.Name, Reason: p.Reason, EvictableAt: p.EvictableAt}
}

func leftPodFromAPI(p api.LeftPod) phases.LeftPod {
	return phases.LeftPod{Namespace: p.Namespace, Name: p.Name, Reason: p.Reason, EvictableAt: p.EvictableAt}
}
