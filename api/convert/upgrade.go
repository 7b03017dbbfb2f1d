package convert

import (
	"fmt"
	"slices"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/phases"
)

// UpgradeToAPI renders an upgrade for the wire; nil stays nil.
func UpgradeToAPI(u *phases.Upgrade) *api.Upgrade {
	if u == nil {
		return nil
	}
	out := &api.Upgrade{
		ID: u.ID, Cluster: u.Cluster, From: u.From.String(), To: u.To.String(),
		Options: optionsToAPI(u.Options), State: UpgradeStateToAPI(u.State),
		CreatedAt: u.CreatedAt, FinishedAt: u.FinishedAt,
		PauseReason: u.PauseReason, PausedAt: u.PausedAt, ResumedAt: u.ResumedAt,
		Preflight: u.Preflight, RefusedChecks: slices.Clone(u.RefusedChecks),
		Steps: conv.Slice(u.Steps, stepToAPI), Pools: conv.Slice(u.Pools, poolTrackToAPI), Nodes: conv.Slice(u.Nodes, nodeTaskToAPI),
		Revision: u.Revision, Closed: u.Closed, Reason: u.Reason, Agents: conv.Slice(u.Agents, agentTaskToAPI),
	}
	readProgress(u, out)
	return out
}

// readProgress sets what the wire carries of the engine's reading of u
// (api.Upgrade's InProgress and Failing, each node's Step), so that
// clients show progress without importing the engine. UpgradeFromAPI
// ignores these fields: the engine derives them again.
func readProgress(u *phases.Upgrade, out *api.Upgrade) {
	out.InProgress = u.InProgress()
	if u.State == phases.UpgradeRunning {
		out.Failing = u.FailReason()
	}
	for i := range u.Pools {
		p := &u.Pools[i]
		if p.First < 0 || p.Count < 0 || p.First+p.Count > len(u.Nodes) || len(out.Nodes) != len(u.Nodes) {
			continue
		}
		for j := p.First; j < p.First+p.Count; j++ {
			n := &u.Nodes[j]
			if n.State != phases.StateRunning && n.State != phases.StateFailed {
				continue
			}
			if steps := p.StepsOf(n); n.Cursor >= 0 && n.Cursor < len(steps) {
				out.Nodes[j].Step = steps[n.Cursor].String()
			}
		}
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
		Options: optionsFromAPI(&d, u.Options), State: phases.UpgradeState(u.State),
		CreatedAt: u.CreatedAt, FinishedAt: u.FinishedAt,
		PauseReason: u.PauseReason, PausedAt: u.PausedAt, ResumedAt: u.ResumedAt,
		Preflight: u.Preflight, RefusedChecks: slices.Clone(u.RefusedChecks),
		Steps: conv.Slice(u.Steps, stepFromAPI), Pools: conv.Slice(u.Pools, func(p api.PoolTrack) phases.PoolTrack { return poolTrackFromAPI(&d, p) }),
		Nodes: conv.Slice(u.Nodes, func(n api.NodeTask) phases.NodeTask {
			return nodeTaskFromAPI(&d, n)
		}),
		Revision: u.Revision, Closed: u.Closed, Reason: u.Reason, Agents: conv.Slice(u.Agents, agentTaskFromAPI),
	}
	if d.err != nil {
		return nil, fmt.Errorf("upgrade %s: %w", u.ID, d.err)
	}
	out.BuildIndex()
	return out, nil
}

func optionsToAPI(o phases.Options) api.UpgradeOptions {
	out := api.UpgradeOptions{Automatic: o.Automatic, ConcurrentWorkerPools: o.ConcurrentWorkerPools, EmergencyReason: o.EmergencyReason, StepLayout: o.StepLayout,
		EndOfSupport: o.EndOfSupport}
	if o.HealthTimeout != 0 {
		out.HealthTimeout = DurationToAPI(o.HealthTimeout)
	}
	if o.GateTimeout != 0 {
		out.GateTimeout = DurationToAPI(o.GateTimeout)
	}
	out.AgentVersion = o.AgentVersion
	if o.AgentTimeout != 0 {
		out.AgentTimeout = DurationToAPI(o.AgentTimeout)
	}
	return out
}

func optionsFromAPI(d *fromAPI, o api.UpgradeOptions) phases.Options {
	out := phases.Options{Automatic: o.Automatic, ConcurrentWorkerPools: o.ConcurrentWorkerPools, EmergencyReason: o.EmergencyReason, StepLayout: o.StepLayout,
		EndOfSupport: o.EndOfSupport}
	if o.HealthTimeout != "" {
		out.HealthTimeout = d.duration("healthTimeout", o.HealthTimeout)
	}
	if o.GateTimeout != "" {
		out.GateTimeout = d.duration("gateTimeout", o.GateTimeout)
	}
	out.AgentVersion = o.AgentVersion
	if o.AgentTimeout != "" {
		out.AgentTimeout = d.duration("agentTimeout", o.AgentTimeout)
	}
	return out
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
		Concurrency: p.Concurrency, MinAvailable: p.MinAvailable, Cancelled: p.Cancelled, First: p.First, Count: p.Count,
		Backing: api.Backing(p.Backing), Strategy: p.Strategy,
		UnavailableSteps: conv.Slice(p.UnavailableSteps, nodeStepToAPI), RollbackSteps: conv.Slice(p.RollbackSteps, nodeStepToAPI),
		MaxSurge: p.MaxSurge, MaxUnavailable: p.MaxUnavailable, Groups: conv.Slice(p.Groups, groupToAPI),
		RollingBack: p.RollingBack, BlueGreen: conv.Ptr(p.BlueGreen, blueGreenToAPI),
		MaxFailedNodes: p.MaxFailedNodes, RollbackPolicy: p.RollbackPolicy, Gates: conv.Slice(p.Gates, HealthGateToAPI), FailReason: p.FailReason}
}

func poolTrackFromAPI(d *fromAPI, p api.PoolTrack) phases.PoolTrack {
	return phases.PoolTrack{Name: p.Name, Role: phases.Role(p.Role), NodeSteps: conv.Slice(p.NodeSteps, nodeStepFromAPI),
		Concurrency: p.Concurrency, MinAvailable: p.MinAvailable, Cancelled: p.Cancelled, First: p.First, Count: p.Count,
		Backing: phases.Backing(p.Backing), Strategy: p.Strategy,
		UnavailableSteps: conv.Slice(p.UnavailableSteps, nodeStepFromAPI), RollbackSteps: conv.Slice(p.RollbackSteps, nodeStepFromAPI),
		MaxSurge: p.MaxSurge, MaxUnavailable: p.MaxUnavailable, Groups: conv.Slice(p.Groups, groupFromAPI),
		RollingBack: p.RollingBack, BlueGreen: conv.Ptr(p.BlueGreen, blueGreenFromAPI),
		MaxFailedNodes: p.MaxFailedNodes, RollbackPolicy: p.RollbackPolicy, FailReason: p.FailReason,
		Gates: conv.Slice(p.Gates, func(g api.HealthGate) phases.HealthGate { return healthGateFromAPI(d, "pool "+p.Name, g) })}
}

func blueGreenToAPI(b phases.BlueGreenTrack) api.BlueGreenTrack {
	return api.BlueGreenTrack{Phase: string(b.Phase), PhaseStartedAt: b.PhaseStartedAt, Attempt: b.Attempt, Message: b.Message,
		Waiting: b.Waiting, RetryAt: b.RetryAt, BatchSize: b.BatchSize, BatchSoak: DurationToAPI(b.BatchSoak), PoolSoak: DurationToAPI(b.PoolSoak),
		Batch: b.Batch, BatchSoakUntil: b.BatchSoakUntil, Soaked: DurationToAPI(b.Soaked), SoakUntil: b.SoakUntil,
		Completed: b.Completed, GreenScalable: b.GreenScalable, RollbackFrom: string(b.RollbackFrom),
		Green: conv.Slice(b.Green, func(g phases.GreenGroup) api.GreenGroup {
			return api.GreenGroup{Zone: g.Zone, Name: g.Name, Nodes: slices.Clone(g.Nodes)}
		})}
}

// blueGreenFromAPI reads what blueGreenToAPI wrote; its durations are
// whole seconds, so an unreadable one (not from this server) reads as 0.
func blueGreenFromAPI(b api.BlueGreenTrack) phases.BlueGreenTrack {
	dur := func(s string) time.Duration { d, _ := durationFromAPI(s); return d }
	return phases.BlueGreenTrack{Phase: phases.BlueGreenPhase(b.Phase), PhaseStartedAt: b.PhaseStartedAt, Attempt: b.Attempt, Message: b.Message,
		Waiting: b.Waiting, RetryAt: b.RetryAt, BatchSize: b.BatchSize, BatchSoak: dur(b.BatchSoak), PoolSoak: dur(b.PoolSoak),
		Batch: b.Batch, BatchSoakUntil: b.BatchSoakUntil, Soaked: dur(b.Soaked), SoakUntil: b.SoakUntil,
		Completed: b.Completed, GreenScalable: b.GreenScalable, RollbackFrom: phases.BlueGreenPhase(b.RollbackFrom),
		Green: conv.Slice(b.Green, func(g api.GreenGroup) phases.GreenGroup {
			return phases.GreenGroup{Zone: g.Zone, Name: g.Name, Nodes: slices.Clone(g.Nodes)}
		})}
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
		ProtectedUntil: n.ProtectedUntil, LeftBehind: conv.Slice(n.LeftBehind, leftPodToAPI), Error: n.Error,
		Zone: n.Zone, Path: n.Path, Replacement: n.Replacement, Current: n.Current, Rollback: n.Rollback, Waiting: n.Waiting, RetryAt: n.RetryAt,
		Applied: conv.Slice(n.Applied, func(a phases.AppliedOp) api.AppliedOp { return api.AppliedOp(a) }),
		Drained: conv.Slice(n.Drained, func(w phases.Workload) api.Workload { return api.Workload(w) }),
		RedGate: n.RedGate, GreenSince: n.GreenSince}
}

func nodeTaskFromAPI(d *fromAPI, n api.NodeTask) phases.NodeTask {
	return phases.NodeTask{Node: n.Node, Pool: n.Pool, State: phases.State(n.State), Cursor: n.Cursor, Attempt: n.Attempt,
		Version: d.version("node "+n.Node+": version", n.Version), StartedAt: n.StartedAt, StepStartedAt: n.StepStartedAt,
		FinishedAt: n.FinishedAt, ProtectedUntil: n.ProtectedUntil, LeftBehind: conv.Slice(n.LeftBehind, leftPodFromAPI), Error: n.Error,
		Zone: n.Zone, Path: n.Path, Replacement: n.Replacement, Current: n.Current, Rollback: n.Rollback, Waiting: n.Waiting, RetryAt: n.RetryAt,
		Applied: conv.Slice(n.Applied, func(a api.AppliedOp) phases.AppliedOp { return phases.AppliedOp(a) }),
		Drained: conv.Slice(n.Drained, func(w api.Workload) phases.Workload { return phases.Workload(w) }),
		RedGate: n.RedGate, GreenSince: n.GreenSince}
}

func leftPodToAPI(p phases.LeftPod) api.LeftPod {
	return api.LeftPod{Namespace: p.Namespace, Name: p.Name, Reason: p.Reason, EvictableAt: p.EvictableAt}
}

func leftPodFromAPI(p api.LeftPod) phases.LeftPod {
	return phases.LeftPod{Namespace: p.Namespace, Name: p.Name, Reason: p.Reason, EvictableAt: p.EvictableAt}
}

// UpgradeForecastToAPI is the forecast the coordinator answers with a
// running upgrade (api.Upgrade.Forecast) at now: phases.Forecast over the
// upgrade's observed durations, the plan's defaults where it has none.
// Nil when the upgrade is not running or nothing can be forecast (a
// failed node holds its pool).
func UpgradeForecastToAPI(u *phases.Upgrade, now time.Time) *api.UpgradeForecast {
	if u == nil || u.State != phases.UpgradeRunning {
		return nil
	}
	end, ok := phases.Forecast(u, phases.ObservedDurations(u, phases.DefaultDurations()), now)
	if !ok {
		return nil
	}
	return &api.UpgradeForecast{At: now, End: end}
}

func agentTaskToAPI(a phases.AgentTask) api.AgentTask {
	return api.AgentTask{Node: a.Node, Pool: a.Pool, From: a.From, State: api.StepState(a.State), Attempt: a.Attempt,
		StartedAt: a.StartedAt, FinishedAt: a.FinishedAt, Version: a.Version, Error: a.Error}
}

func agentTaskFromAPI(a api.AgentTask) phases.AgentTask {
	return phases.AgentTask{Node: a.Node, Pool: a.Pool, From: a.From, State: phases.State(a.State), Attempt: a.Attempt,
		StartedAt: a.StartedAt, FinishedAt: a.FinishedAt, Version: a.Version, Error: a.Error}
}
