package phases

import (
	"slices"
	"time"
)

// StepKind is what a cluster upgrade step does.
type StepKind string

// Step kinds. A pool step upgrades one pool node by node; addons and
// lifecycle apply manifests through the cluster's API server; health runs
// the final cluster checks until they all pass.
const (
	StepPool      StepKind = "pool"
	StepAddons    StepKind = "addons"
	StepLifecycle StepKind = "lifecycle"
	StepHealth    StepKind = "health"
	// StepMolt replaces the molt-agent of every host that runs another
	// agent release than the upgrade's (Options.AgentVersion), before any
	// Kubernetes step (molt.go).
	StepMolt StepKind = "molt"
	// StepBackup takes an etcd snapshot before the control-plane pools
	// (backup.go).
	StepBackup StepKind = "backup"
)

// Step IDs that are not pools.
const (
	StepIDAddons    = "addons"
	StepIDLifecycle = "lifecycle"
	StepIDHealth    = "health"
	StepIDMolt      = "molt"
	StepIDBackup    = "backup"
)

// PoolStepID is the ID of the step that upgrades a pool.
func PoolStepID(pool string) string { return "pool/" + pool }

// State is where a step or a node upgrade is.
type State string

// States shared by steps and node upgrades.
const (
	StatePending State = "pending"
	StateRunning State = "running"
	StateDone    State = "done"
	StateFailed  State = "failed"
	// StateCancelled: a pool step that was cancelled and has nothing in
	// flight; a resume runs it again.
	StateCancelled State = "cancelled"
	// StateRolledBack: a pool step whose rollback finished: every node it
	// had upgraded runs the version before again. Final.
	StateRolledBack State = "rolledBack"
)

// Target is the part of a cluster a change touches; maintenance exclusions
// scope on it (SPEC §9).
type Target string

// Targets.
const (
	TargetControlPlane Target = "controlPlane"
	TargetNodes        Target = "nodes"
)

// Step is one box of the upgrade's step graph (SPEC §4), with its own state
// and timestamps so an operator can always see where the upgrade is.
type Step struct {
	ID   string
	Kind StepKind
	// Pool and Role are set on pool steps.
	Pool string
	Role Role
	// Deps are the steps that must be done before this one starts.
	Deps       []string
	State      State
	StartedAt  time.Time
	FinishedAt time.Time
	// Attempts counts runs of a step that is retried until it passes
	// (health checks); Message is the latest outcome.
	Attempts int
	Message  string
}

// Target says which maintenance target the step's disruption belongs to.
// Health checks disrupt nothing and are never gated.
func (s *Step) Target() (Target, bool) {
	switch s.Kind {
	case StepAddons, StepLifecycle:
		return TargetControlPlane, true
	case StepPool:
		if s.Role == RoleControlPlane || s.Role == RoleControlPlaneLB {
			return TargetControlPlane, true
		}
		return TargetNodes, true
	}
	return "", false
}

// Step layouts: how NewUpgrade lays out the steps. An upgrade records the
// layout it was made with (Options.StepLayout), so the Raft log of an older
// release replays to the same upgrades in every later one.
const (
	// StepLayoutLifecycle (0, the first) has a lifecycle step beside the
	// add-ons.
	StepLayoutLifecycle = 0
	// StepLayoutNoLifecycle drops the lifecycle step: no release carries
	// lifecycle-controller manifests, and a step with nothing behind it
	// would report work it did not do.
	StepLayoutNoLifecycle = 1
	// StepLayoutMIG lays MIG pools out for their strategies: surge with
	// zones one after another and two node paths, or blue/green phases
	// (layoutMIG). Earlier layouts gave every MIG pool SurgeNodeSteps.
	StepLayoutMIG = 2
	// StepLayoutGates adds health gates after each node (NodeGates), a
	// failure budget per pool and rollback steps for bare-metal pools
	// (health.go).
	StepLayoutGates = 3
	// StepLayoutMolt starts an upgrade whose target release names a
	// molt-agent (Options.AgentVersion) with a molt step that updates
	// the hosts' agents first (molt.go). Introduced in molt 0.2.0.
	StepLayoutMolt = 4
	// StepLayoutBackup adds a backup step before the control-plane pools
	// of a cluster that has them and does not skip it
	// (ClusterSpec.EtcdBackup): an etcd snapshot must be recorded before
	// the first control-plane node starts (backup.go). Introduced in molt
	// 0.2.0.
	StepLayoutBackup = 5
	// CurrentStepLayout is what new upgrades and plans use.
	CurrentStepLayout = StepLayoutBackup
)

// buildSteps lays out the step graph of SPEC §4 for a cluster:
//
//	control-plane LB pools → control-plane pool →
//	  (addons ∥ loadBalancer pools) →
//	  worker pools (after the loadBalancer pools) → health
//
// (layout StepLayoutLifecycle adds a lifecycle step beside the add-ons;
// with molt set, a molt step comes before everything else; from
// StepLayoutBackup a backup step comes between the control-plane LB pools
// and the control-plane pools).
func buildSteps(c *ClusterSpec, layout int, molt bool) []Step {
	var cplb, cp, lb, workers []string
	for _, p := range c.Pools {
		switch p.Role {
		case RoleControlPlaneLB:
			cplb = append(cplb, p.Name)
		case RoleControlPlane:
			cp = append(cp, p.Name)
		case RoleLoadBalancer:
			lb = append(lb, p.Name)
		case RoleWorker:
			workers = append(workers, p.Name)
		}
	}
	var steps []Step
	var all []string
	add := func(s Step) {
		s.State = StatePending
		steps = append(steps, s)
		all = append(all, s.ID)
	}
	var first []string
	if molt {
		add(Step{ID: StepIDMolt, Kind: StepMolt})
		first = []string{StepIDMolt}
	}
	ids := func(pools []string) []string {
		if len(pools) == 0 && molt {
			return []string{StepIDMolt}
		}
		out := make([]string, len(pools))
		for i, p := range pools {
			out[i] = PoolStepID(p)
		}
		return out
	}
	for _, p := range cplb {
		add(Step{ID: PoolStepID(p), Kind: StepPool, Pool: p, Role: RoleControlPlaneLB, Deps: slices.Clone(first)})
	}
	cpDeps := ids(cplb)
	if backupStep(c, layout) && len(cp) > 0 {
		add(Step{ID: StepIDBackup, Kind: StepBackup, Deps: cpDeps})
		cpDeps = []string{StepIDBackup}
	}
	for _, p := range cp {
		add(Step{ID: PoolStepID(p), Kind: StepPool, Pool: p, Role: RoleControlPlane, Deps: slices.Clone(cpDeps)})
	}
	afterCP := ids(cp)
	add(Step{ID: StepIDAddons, Kind: StepAddons, Deps: afterCP})
	if layout == StepLayoutLifecycle {
		add(Step{ID: StepIDLifecycle, Kind: StepLifecycle, Deps: afterCP})
	}
	for _, p := range lb {
		add(Step{ID: PoolStepID(p), Kind: StepPool, Pool: p, Role: RoleLoadBalancer, Deps: afterCP})
	}
	workerDeps := afterCP
	if len(lb) > 0 {
		workerDeps = ids(lb)
	}
	for _, p := range workers {
		add(Step{ID: PoolStepID(p), Kind: StepPool, Pool: p, Role: RoleWorker, Deps: workerDeps})
	}
	add(Step{ID: StepIDHealth, Kind: StepHealth, Deps: append([]string(nil), all...)})
	return steps
}
