package statemachine

import (
	"fmt"
	"slices"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore/command"
)

// Persisted form of an upgrade, of the decisions and results that change
// it, and of a finished upgrade's summary (see persisted.go: append-only).

type upgradeV1 struct {
	ID            string        `json:"id"`
	Cluster       string        `json:"cluster"`
	From          string        `json:"from"`
	To            string        `json:"to"`
	Options       optionsV1     `json:"options"`
	State         string        `json:"state"`
	CreatedAt     time.Time     `json:"createdAt"`
	FinishedAt    time.Time     `json:"finishedAt,omitzero"`
	PauseReason   string        `json:"pauseReason,omitempty"`
	PausedAt      time.Time     `json:"pausedAt,omitzero"`
	ResumedAt     time.Time     `json:"resumedAt,omitzero"`
	Preflight     string        `json:"preflight,omitempty"`
	RefusedChecks []string      `json:"refusedChecks,omitempty"`
	Steps         []stepV1      `json:"steps"`
	Pools         []poolTrackV1 `json:"pools"`
	Nodes         []nodeTaskV1  `json:"nodes"`
	Revision      uint64        `json:"revision"`
	Closed        bool          `json:"closed,omitempty"`
	// Added with failure budgets; absent before.
	Reason string `json:"reason,omitempty"`
	// Added with the molt step (0.2.0, SinceAgentUpdate); absent before.
	Agents []agentTaskV1 `json:"agents,omitempty"`
}

type optionsV1 struct {
	Automatic             bool   `json:"automatic"`
	ConcurrentWorkerPools int    `json:"concurrentWorkerPools,omitempty"`
	EmergencyReason       string `json:"emergencyReason,omitempty"`
	// StepLayout was added after V1's first release; absent means 0.
	StepLayout int `json:"stepLayout,omitempty"`
	// Added with health gates (nanoseconds); absent means none.
	HealthTimeout time.Duration `json:"healthTimeout,omitempty"`
	GateTimeout   time.Duration `json:"gateTimeout,omitempty"`
	// EndOfSupport was added with automatic upgrades; absent means false.
	EndOfSupport bool `json:"endOfSupport,omitempty"`
	// Added with the molt step (0.2.0, SinceAgentUpdate); absent before.
	// AgentVersions is carried by the command that starts an upgrade
	// only: the upgrade keeps each host's in its Agents.
	AgentVersion  string            `json:"agentVersion,omitempty"`
	AgentTimeout  time.Duration     `json:"agentTimeout,omitempty"`
	AgentVersions map[string]string `json:"agentVersions,omitempty"`
}

type stepV1 struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"`
	Pool       string    `json:"pool,omitempty"`
	Role       string    `json:"role,omitempty"`
	Deps       []string  `json:"deps,omitempty"`
	State      string    `json:"state"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	Attempts   int       `json:"attempts,omitempty"`
	Message    string    `json:"message,omitempty"`
}

type poolTrackV1 struct {
	Name         string       `json:"name"`
	Role         string       `json:"role"`
	NodeSteps    []nodeStepV1 `json:"nodeSteps"`
	Concurrency  int          `json:"concurrency"`
	MinAvailable int          `json:"minAvailable"`
	Cancelled    bool         `json:"cancelled,omitempty"`
	First        int          `json:"first"`
	Count        int          `json:"count"`
	// Added with the MIG strategies (StepLayoutMIG); absent before.
	Backing          string            `json:"backing,omitempty"`
	Strategy         string            `json:"strategy,omitempty"`
	UnavailableSteps []nodeStepV1      `json:"unavailableSteps,omitempty"`
	RollbackSteps    []nodeStepV1      `json:"rollbackSteps,omitempty"`
	MaxSurge         int               `json:"maxSurge,omitempty"`
	MaxUnavailable   int               `json:"maxUnavailable,omitempty"`
	Groups           []instanceGroupV1 `json:"groups,omitempty"`
	RollingBack      bool              `json:"rollingBack,omitempty"`
	BlueGreen        *blueGreenTrackV1 `json:"blueGreen,omitempty"`
	// Added with failure budgets and health gates (StepLayoutGates);
	// absent before.
	MaxFailedNodes int            `json:"maxFailedNodes,omitempty"`
	RollbackPolicy string         `json:"rollbackPolicy,omitempty"`
	Gates          []healthGateV1 `json:"gates,omitempty"`
	FailReason     string         `json:"failReason,omitempty"`
}

// blueGreenTrackV1 is a blue/green pool's progress; durations are
// nanoseconds.
type blueGreenTrackV1 struct {
	Phase          string         `json:"phase"`
	PhaseStartedAt time.Time      `json:"phaseStartedAt,omitzero"`
	Attempt        int            `json:"attempt,omitempty"`
	Message        string         `json:"message,omitempty"`
	Waiting        string         `json:"waiting,omitempty"`
	RetryAt        time.Time      `json:"retryAt,omitzero"`
	BatchSize      int            `json:"batchSize"`
	BatchSoak      time.Duration  `json:"batchSoak"`
	PoolSoak       time.Duration  `json:"poolSoak"`
	Batch          int            `json:"batch"`
	BatchSoakUntil time.Time      `json:"batchSoakUntil,omitzero"`
	Soaked         time.Duration  `json:"soaked"`
	SoakUntil      time.Time      `json:"soakUntil,omitzero"`
	Completed      bool           `json:"completed,omitempty"`
	GreenScalable  bool           `json:"greenScalable,omitempty"`
	Green          []greenGroupV1 `json:"green,omitempty"`
	RollbackFrom   string         `json:"rollbackFrom,omitempty"`
}

type greenGroupV1 struct {
	Zone  string   `json:"zone"`
	Name  string   `json:"name"`
	Nodes []string `json:"nodes"`
}

type nodeStepV1 struct {
	Kind string    `json:"kind"`
	Op   *opSpecV1 `json:"op,omitempty"`
}

type opSpecV1 struct {
	Kind      string `json:"kind"`
	Component string `json:"component,omitempty"`
}

type nodeTaskV1 struct {
	Node           string      `json:"node"`
	Pool           string      `json:"pool"`
	State          string      `json:"state"`
	Cursor         int         `json:"cursor"`
	Attempt        int         `json:"attempt"`
	Version        string      `json:"version"`
	StartedAt      time.Time   `json:"startedAt,omitzero"`
	StepStartedAt  time.Time   `json:"stepStartedAt,omitzero"`
	FinishedAt     time.Time   `json:"finishedAt,omitzero"`
	ProtectedUntil time.Time   `json:"protectedUntil,omitzero"`
	LeftBehind     []leftPodV1 `json:"leftBehind,omitempty"`
	Error          string      `json:"error,omitempty"`
	// Added with the MIG strategies; absent before.
	Zone        string    `json:"zone,omitempty"`
	Path        int       `json:"path,omitempty"`
	Replacement string    `json:"replacement,omitempty"`
	Current     string    `json:"current,omitempty"`
	Rollback    bool      `json:"rollback,omitempty"`
	Waiting     string    `json:"waiting,omitempty"`
	RetryAt     time.Time `json:"retryAt,omitzero"`
	// Added with failure budgets and health gates; absent before.
	Applied    []appliedOpV1 `json:"applied,omitempty"`
	Drained    []workloadV1  `json:"drained,omitempty"`
	RedGate    string        `json:"redGate,omitempty"`
	GreenSince time.Time     `json:"greenSince,omitzero"`
}

// appliedOpV1 is an agent operation that may have changed a component.
type appliedOpV1 struct {
	Component string `json:"component"`
	ID        string `json:"id"`
}

// workloadV1 is a controller whose pods a drain evicted.
type workloadV1 struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// gateCheckV1 is one observed check of a gates step.
type gateCheckV1 struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok,omitempty"`
	Value string `json:"value,omitempty"`
}

type leftPodV1 struct {
	Namespace   string    `json:"namespace"`
	Name        string    `json:"name"`
	Reason      string    `json:"reason"`
	EvictableAt time.Time `json:"evictableAt,omitzero"`
}

// actionV1 is a decision committed by AdvanceCmd.
type actionV1 struct {
	ID       string     `json:"id"`
	Kind     string     `json:"kind"`
	Upgrade  string     `json:"upgrade"`
	Step     string     `json:"step,omitempty"`
	Pool     string     `json:"pool,omitempty"`
	Node     string     `json:"node,omitempty"`
	Cursor   int        `json:"cursor,omitempty"`
	Attempt  int        `json:"attempt,omitempty"`
	NodeStep nodeStepV1 `json:"nodeStep,omitzero"`
	Reason   string     `json:"reason,omitempty"`
	// Added with the MIG strategies; absent before.
	Path     int    `json:"path,omitempty"`
	Rollback bool   `json:"rollback,omitempty"`
	Phase    string `json:"phase,omitempty"`
}

type nodeStepResultV1 struct {
	Upgrade    string      `json:"upgrade"`
	Node       string      `json:"node"`
	Cursor     int         `json:"cursor"`
	Attempt    int         `json:"attempt"`
	OK         bool        `json:"ok"`
	Message    string      `json:"message,omitempty"`
	LeftBehind []leftPodV1 `json:"leftBehind,omitempty"`
	// Added with the MIG strategies; absent before.
	Wait    string    `json:"wait,omitempty"`
	RetryAt time.Time `json:"retryAt,omitzero"`
	// Added with health gates; absent before.
	Drained []workloadV1  `json:"drained,omitempty"`
	Gates   []gateCheckV1 `json:"gates,omitempty"`
}

// poolWorkResultV1 is the outcome of a blue/green pool's work.
type poolWorkResultV1 struct {
	Upgrade string         `json:"upgrade"`
	Pool    string         `json:"pool"`
	Work    string         `json:"work"`
	Phase   string         `json:"phase"`
	Attempt int            `json:"attempt"`
	OK      bool           `json:"ok"`
	Message string         `json:"message,omitempty"`
	Wait    string         `json:"wait,omitempty"`
	RetryAt time.Time      `json:"retryAt,omitzero"`
	Green   []greenGroupV1 `json:"green,omitempty"`
}

type stepResultV1 struct {
	Upgrade string `json:"upgrade"`
	Step    string `json:"step"`
	Attempt int    `json:"attempt"`
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
}

// upgradeSummaryV1 is a finished upgrade in a cluster's history.
type upgradeSummaryV1 struct {
	ID         string    `json:"id"`
	From       string    `json:"from"`
	To         string    `json:"to"`
	State      string    `json:"state"`
	CreatedAt  time.Time `json:"createdAt"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}

func upgradeToV1(u phases.Upgrade) upgradeV1 {
	return upgradeV1{
		ID: u.ID, Cluster: u.Cluster, From: u.From.String(), To: u.To.String(), Options: optionsToV1(u.Options), State: string(u.State),
		CreatedAt: u.CreatedAt, FinishedAt: u.FinishedAt, PauseReason: u.PauseReason, PausedAt: u.PausedAt, ResumedAt: u.ResumedAt,
		Preflight: u.Preflight, RefusedChecks: slices.Clone(u.RefusedChecks),
		Steps: conv.Slice(u.Steps, stepToV1), Pools: conv.Slice(u.Pools, poolTrackToV1), Nodes: conv.Slice(u.Nodes, nodeTaskToV1),
		Revision: u.Revision, Closed: u.Closed, Reason: u.Reason, Agents: conv.Slice(u.Agents, agentTaskToV1),
	}
}

// upgrade returns the upgrade with its lookup indexes built: the state's
// readers (Decide, under the read lock) never write them.
func (d *v1Decoder) upgrade(u upgradeV1) phases.Upgrade {
	out := phases.Upgrade{
		ID: u.ID, Cluster: u.Cluster, From: d.version(u.From), To: d.version(u.To), Options: d.options(u.Options), State: phases.UpgradeState(u.State),
		CreatedAt: u.CreatedAt, FinishedAt: u.FinishedAt, PauseReason: u.PauseReason, PausedAt: u.PausedAt, ResumedAt: u.ResumedAt,
		Preflight: u.Preflight, RefusedChecks: slices.Clone(u.RefusedChecks),
		Steps: conv.Slice(u.Steps, stepFromV1), Pools: conv.Slice(u.Pools, poolTrackFromV1), Nodes: conv.Slice(u.Nodes, d.nodeTask),
		Revision: u.Revision, Closed: u.Closed, Reason: u.Reason, Agents: conv.Slice(u.Agents, agentTaskFromV1),
	}
	out.BuildIndex()
	return out
}

func optionsToV1(o phases.Options) optionsV1 {
	return optionsV1{Automatic: o.Automatic, ConcurrentWorkerPools: o.ConcurrentWorkerPools, EmergencyReason: o.EmergencyReason, StepLayout: o.StepLayout,
		HealthTimeout: o.HealthTimeout, GateTimeout: o.GateTimeout, EndOfSupport: o.EndOfSupport,
		AgentVersion: o.AgentVersion, AgentTimeout: o.AgentTimeout, AgentVersions: conv.Map(o.AgentVersions, conv.Same[string])}
}

// options reads an upgrade's options. A step layout newer than this
// release knows (phases.CurrentStepLayout) cannot be read: its engine
// would take it for the newest it knows (the `>=` checks of phases) and
// lay out or judge the upgrade otherwise than the release that wrote it,
// so the entry or snapshot is refused as command.ErrCannotRead, and the
// replica halts (raftstore).
func (d *v1Decoder) options(o optionsV1) phases.Options {
	if o.StepLayout > phases.CurrentStepLayout && d.err == nil {
		d.err = fmt.Errorf("%w: step layout %d is newer than this release knows (up to %d)", command.ErrCannotRead, o.StepLayout, phases.CurrentStepLayout)
	}
	return optionsFromV1(o)
}

func optionsFromV1(o optionsV1) phases.Options {
	return phases.Options{Automatic: o.Automatic, ConcurrentWorkerPools: o.ConcurrentWorkerPools, EmergencyReason: o.EmergencyReason, StepLayout: o.StepLayout,
		HealthTimeout: o.HealthTimeout, GateTimeout: o.GateTimeout, EndOfSupport: o.EndOfSupport,
		AgentVersion: o.AgentVersion, AgentTimeout: o.AgentTimeout, AgentVersions: conv.Map(o.AgentVersions, conv.Same[string])}
}

func stepToV1(s phases.Step) stepV1 {
	return stepV1{ID: s.ID, Kind: string(s.Kind), Pool: s.Pool, Role: string(s.Role), Deps: slices.Clone(s.Deps), State: string(s.State),
		StartedAt: s.StartedAt, FinishedAt: s.FinishedAt, Attempts: s.Attempts, Message: s.Message}
}

func stepFromV1(s stepV1) phases.Step {
	return phases.Step{ID: s.ID, Kind: phases.StepKind(s.Kind), Pool: s.Pool, Role: phases.Role(s.Role), Deps: slices.Clone(s.Deps), State: phases.State(s.State),
		StartedAt: s.StartedAt, FinishedAt: s.FinishedAt, Attempts: s.Attempts, Message: s.Message}
}

func poolTrackToV1(p phases.PoolTrack) poolTrackV1 {
	return poolTrackV1{Name: p.Name, Role: string(p.Role), NodeSteps: conv.Slice(p.NodeSteps, nodeStepToV1),
		Concurrency: p.Concurrency, MinAvailable: p.MinAvailable, Cancelled: p.Cancelled, First: p.First, Count: p.Count,
		Backing: string(p.Backing), Strategy: p.Strategy,
		UnavailableSteps: conv.Slice(p.UnavailableSteps, nodeStepToV1), RollbackSteps: conv.Slice(p.RollbackSteps, nodeStepToV1),
		MaxSurge: p.MaxSurge, MaxUnavailable: p.MaxUnavailable, Groups: conv.Slice(p.Groups, instanceGroupToV1),
		RollingBack: p.RollingBack, BlueGreen: conv.Ptr(p.BlueGreen, blueGreenToV1),
		MaxFailedNodes: p.MaxFailedNodes, RollbackPolicy: p.RollbackPolicy, Gates: conv.Slice(p.Gates, healthGateToV1), FailReason: p.FailReason}
}

func poolTrackFromV1(p poolTrackV1) phases.PoolTrack {
	return phases.PoolTrack{Name: p.Name, Role: phases.Role(p.Role), NodeSteps: conv.Slice(p.NodeSteps, nodeStepFromV1),
		Concurrency: p.Concurrency, MinAvailable: p.MinAvailable, Cancelled: p.Cancelled, First: p.First, Count: p.Count,
		Backing: phases.Backing(p.Backing), Strategy: p.Strategy,
		UnavailableSteps: conv.Slice(p.UnavailableSteps, nodeStepFromV1), RollbackSteps: conv.Slice(p.RollbackSteps, nodeStepFromV1),
		MaxSurge: p.MaxSurge, MaxUnavailable: p.MaxUnavailable, Groups: conv.Slice(p.Groups, instanceGroupFromV1),
		RollingBack: p.RollingBack, BlueGreen: conv.Ptr(p.BlueGreen, blueGreenFromV1),
		MaxFailedNodes: p.MaxFailedNodes, RollbackPolicy: p.RollbackPolicy, Gates: conv.Slice(p.Gates, healthGateFromV1), FailReason: p.FailReason}
}

func blueGreenToV1(b phases.BlueGreenTrack) blueGreenTrackV1 {
	return blueGreenTrackV1{Phase: string(b.Phase), PhaseStartedAt: b.PhaseStartedAt, Attempt: b.Attempt, Message: b.Message,
		Waiting: b.Waiting, RetryAt: b.RetryAt, BatchSize: b.BatchSize, BatchSoak: b.BatchSoak, PoolSoak: b.PoolSoak,
		Batch: b.Batch, BatchSoakUntil: b.BatchSoakUntil, Soaked: b.Soaked, SoakUntil: b.SoakUntil,
		Completed: b.Completed, GreenScalable: b.GreenScalable, Green: conv.Slice(b.Green, greenGroupToV1), RollbackFrom: string(b.RollbackFrom)}
}

func blueGreenFromV1(b blueGreenTrackV1) phases.BlueGreenTrack {
	return phases.BlueGreenTrack{Phase: phases.BlueGreenPhase(b.Phase), PhaseStartedAt: b.PhaseStartedAt, Attempt: b.Attempt, Message: b.Message,
		Waiting: b.Waiting, RetryAt: b.RetryAt, BatchSize: b.BatchSize, BatchSoak: b.BatchSoak, PoolSoak: b.PoolSoak,
		Batch: b.Batch, BatchSoakUntil: b.BatchSoakUntil, Soaked: b.Soaked, SoakUntil: b.SoakUntil,
		Completed: b.Completed, GreenScalable: b.GreenScalable, Green: conv.Slice(b.Green, greenGroupFromV1), RollbackFrom: phases.BlueGreenPhase(b.RollbackFrom)}
}

func greenGroupToV1(g phases.GreenGroup) greenGroupV1 {
	return greenGroupV1{Zone: g.Zone, Name: g.Name, Nodes: slices.Clone(g.Nodes)}
}

func greenGroupFromV1(g greenGroupV1) phases.GreenGroup {
	return phases.GreenGroup{Zone: g.Zone, Name: g.Name, Nodes: slices.Clone(g.Nodes)}
}

func nodeStepToV1(s phases.NodeStep) nodeStepV1 {
	return nodeStepV1{Kind: string(s.Kind), Op: conv.Ptr(s.Op, func(o phases.OpSpec) opSpecV1 {
		return opSpecV1{Kind: string(o.Kind), Component: o.Component}
	})}
}

func nodeStepFromV1(s nodeStepV1) phases.NodeStep {
	return phases.NodeStep{Kind: phases.NodeStepKind(s.Kind), Op: conv.Ptr(s.Op, func(o opSpecV1) phases.OpSpec {
		return phases.OpSpec{Kind: phases.OpKind(o.Kind), Component: o.Component}
	})}
}

func nodeTaskToV1(n phases.NodeTask) nodeTaskV1 {
	return nodeTaskV1{Node: n.Node, Pool: n.Pool, State: string(n.State), Cursor: n.Cursor, Attempt: n.Attempt, Version: n.Version.String(),
		StartedAt: n.StartedAt, StepStartedAt: n.StepStartedAt, FinishedAt: n.FinishedAt, ProtectedUntil: n.ProtectedUntil,
		LeftBehind: conv.Slice(n.LeftBehind, leftPodToV1), Error: n.Error,
		Zone: n.Zone, Path: n.Path, Replacement: n.Replacement, Current: n.Current, Rollback: n.Rollback, Waiting: n.Waiting, RetryAt: n.RetryAt,
		Applied: conv.Slice(n.Applied, func(a phases.AppliedOp) appliedOpV1 { return appliedOpV1(a) }),
		Drained: conv.Slice(n.Drained, workloadToV1), RedGate: n.RedGate, GreenSince: n.GreenSince}
}

func workloadToV1(w phases.Workload) workloadV1   { return workloadV1(w) }
func workloadFromV1(w workloadV1) phases.Workload { return phases.Workload(w) }

func (d *v1Decoder) nodeTask(n nodeTaskV1) phases.NodeTask {
	return phases.NodeTask{Node: n.Node, Pool: n.Pool, State: phases.State(n.State), Cursor: n.Cursor, Attempt: n.Attempt, Version: d.version(n.Version),
		StartedAt: n.StartedAt, StepStartedAt: n.StepStartedAt, FinishedAt: n.FinishedAt, ProtectedUntil: n.ProtectedUntil,
		LeftBehind: conv.Slice(n.LeftBehind, leftPodFromV1), Error: n.Error,
		Zone: n.Zone, Path: n.Path, Replacement: n.Replacement, Current: n.Current, Rollback: n.Rollback, Waiting: n.Waiting, RetryAt: n.RetryAt,
		Applied: conv.Slice(n.Applied, func(a appliedOpV1) phases.AppliedOp { return phases.AppliedOp(a) }),
		Drained: conv.Slice(n.Drained, workloadFromV1), RedGate: n.RedGate, GreenSince: n.GreenSince}
}

func leftPodToV1(p phases.LeftPod) leftPodV1 {
	return leftPodV1{Namespace: p.Namespace, Name: p.Name, Reason: p.Reason, EvictableAt: p.EvictableAt}
}

func leftPodFromV1(p leftPodV1) phases.LeftPod {
	return phases.LeftPod{Namespace: p.Namespace, Name: p.Name, Reason: p.Reason, EvictableAt: p.EvictableAt}
}

func actionToV1(a phases.Action) actionV1 {
	return actionV1{ID: a.ID, Kind: string(a.Kind), Upgrade: a.Upgrade, Step: a.Step, Pool: a.Pool, Node: a.Node,
		Cursor: a.Cursor, Attempt: a.Attempt, NodeStep: nodeStepToV1(a.NodeStep), Reason: a.Reason,
		Path: a.Path, Rollback: a.Rollback, Phase: a.Phase}
}

func actionFromV1(a actionV1) phases.Action {
	return phases.Action{ID: a.ID, Kind: phases.ActionKind(a.Kind), Upgrade: a.Upgrade, Step: a.Step, Pool: a.Pool, Node: a.Node,
		Cursor: a.Cursor, Attempt: a.Attempt, NodeStep: nodeStepFromV1(a.NodeStep), Reason: a.Reason,
		Path: a.Path, Rollback: a.Rollback, Phase: a.Phase}
}

func nodeStepResultToV1(r phases.NodeStepResult) nodeStepResultV1 {
	return nodeStepResultV1{Upgrade: r.Upgrade, Node: r.Node, Cursor: r.Cursor, Attempt: r.Attempt, OK: r.OK, Message: r.Message,
		LeftBehind: conv.Slice(r.LeftBehind, leftPodToV1), Wait: r.Wait, RetryAt: r.RetryAt,
		Drained: conv.Slice(r.Drained, workloadToV1), Gates: conv.Slice(r.Gates, func(g phases.GateCheck) gateCheckV1 { return gateCheckV1(g) })}
}

func nodeStepResultFromV1(r nodeStepResultV1) phases.NodeStepResult {
	return phases.NodeStepResult{Upgrade: r.Upgrade, Node: r.Node, Cursor: r.Cursor, Attempt: r.Attempt, OK: r.OK, Message: r.Message,
		LeftBehind: conv.Slice(r.LeftBehind, leftPodFromV1), Wait: r.Wait, RetryAt: r.RetryAt,
		Drained: conv.Slice(r.Drained, workloadFromV1), Gates: conv.Slice(r.Gates, func(g gateCheckV1) phases.GateCheck { return phases.GateCheck(g) })}
}

func poolWorkResultToV1(r phases.PoolWorkResult) poolWorkResultV1 {
	return poolWorkResultV1{Upgrade: r.Upgrade, Pool: r.Pool, Work: r.Work, Phase: string(r.Phase), Attempt: r.Attempt, OK: r.OK,
		Message: r.Message, Wait: r.Wait, RetryAt: r.RetryAt, Green: conv.Slice(r.Green, greenGroupToV1)}
}

func poolWorkResultFromV1(r poolWorkResultV1) phases.PoolWorkResult {
	return phases.PoolWorkResult{Upgrade: r.Upgrade, Pool: r.Pool, Work: r.Work, Phase: phases.BlueGreenPhase(r.Phase), Attempt: r.Attempt, OK: r.OK,
		Message: r.Message, Wait: r.Wait, RetryAt: r.RetryAt, Green: conv.Slice(r.Green, greenGroupFromV1)}
}

func stepResultToV1(r phases.StepResult) stepResultV1 {
	return stepResultV1{Upgrade: r.Upgrade, Step: r.Step, Attempt: r.Attempt, OK: r.OK, Message: r.Message}
}

func stepResultFromV1(r stepResultV1) phases.StepResult {
	return phases.StepResult{Upgrade: r.Upgrade, Step: r.Step, Attempt: r.Attempt, OK: r.OK, Message: r.Message}
}

func upgradeSummaryToV1(s api.UpgradeSummary) upgradeSummaryV1 {
	return upgradeSummaryV1{ID: s.ID, From: s.From, To: s.To, State: string(s.State), CreatedAt: s.CreatedAt, FinishedAt: s.FinishedAt}
}

func upgradeSummaryFromV1(s upgradeSummaryV1) api.UpgradeSummary {
	return api.UpgradeSummary{ID: s.ID, From: s.From, To: s.To, State: api.UpgradeState(s.State), CreatedAt: s.CreatedAt, FinishedAt: s.FinishedAt}
}
