package phases

import (
	"errors"
	"fmt"
	"time"
)

// UpgradeState is where a whole cluster upgrade is.
type UpgradeState string

// Upgrade states.
const (
	// UpgradePreflight: the upgrade waits for its preflight run (Upgrade.
	// Preflight); nothing of the cluster is touched and spec.version is not
	// set yet (SPEC §4, steps 1–2).
	UpgradePreflight UpgradeState = "preflight"
	// UpgradeRefused: its preflight had blocking failures (RefusedChecks);
	// nothing was touched. Final.
	UpgradeRefused   UpgradeState = "refused"
	UpgradeRunning   UpgradeState = "running"
	UpgradeDone      UpgradeState = "done"
	UpgradeFailed    UpgradeState = "failed"
	UpgradeCancelled UpgradeState = "cancelled"
)

// Options are the per-upgrade choices the coordinator records at start.
type Options struct {
	// Automatic upgrades are gated by maintenance policy and honour the
	// 7-day protection of safe-to-evict=false pods; manual ones are not.
	Automatic bool
	// ConcurrentWorkerPools is how many worker pools upgrade at once
	// (default 1: one after another, in the order the cluster lists them).
	ConcurrentWorkerPools int
	// EmergencyReason is set on an emergency patch an operator forced
	// through maintenance windows and exclusions; it is kept for audit.
	EmergencyReason string
	// StepLayout is the layout NewUpgrade used (StepLayoutLifecycle, the
	// zero value, for upgrades recorded before layouts had numbers).
	StepLayout int
	// HealthTimeout is how long the final health step is retried before
	// the upgrade fails (0: until it passes, as before StepLayoutGates);
	// GateTimeout how long a node's health gates may stay red before the
	// node fails. The coordinator records its settings at start.
	HealthTimeout time.Duration
	GateTimeout   time.Duration
	// EndOfSupport is set on an automatic upgrade the scheduler started
	// because the cluster's minor passed its end of support (SPEC §14): it
	// runs through maintenance windows and exclusions.
	EndOfSupport bool
	// AgentVersion is the molt-agent release the target release names
	// ("": none, and no molt step); AgentTimeout how long a host's agent
	// replacement may take, from its start until the new agent reports
	// (0: no deadline). Upgrades laid out at StepLayoutMolt on.
	AgentVersion string
	AgentTimeout time.Duration
	// AgentVersions is the molt-agent release each node's agent reported
	// when the upgrade was proposed (node → release): NewUpgrade gives
	// every node whose entry is not AgentVersion a task in the molt step
	// (Upgrade.Agents, which keep it as From). It is an input, not kept.
	AgentVersions map[string]string
}

// PoolTrack is a pool's part of an upgrade: the node steps every node of the
// pool goes through and the budget that bounds how many go at once.
type PoolTrack struct {
	Name         string
	Role         Role
	NodeSteps    []NodeStep
	Concurrency  int
	MinAvailable int
	// Cancelled pools start no new node; nodes already started finish.
	// A blue/green pool that is cancelled pauses in its phase.
	Cancelled bool
	// First and Count locate the pool's nodes in Upgrade.Nodes.
	First int
	Count int

	// Backing and Strategy say how the pool's nodes are upgraded: in
	// place (bare metal), or by replacing instances with surge or
	// blue/green (MIG pools of upgrades laid out at StepLayoutMIG on).
	Backing  Backing
	Strategy string
	// UnavailableSteps is a surge pool's second path: a node the zone's
	// maxUnavailable budget takes is recreated in place instead of being
	// replaced by a surge instance (NodeTask.Path).
	UnavailableSteps []NodeStep
	// RollbackSteps is the path of a node that goes back without being
	// upgraded again (PathRollback): for a surge pool, a node whose
	// replacement was made but that was not replaced yet.
	RollbackSteps []NodeStep
	// MaxSurge and MaxUnavailable are a surge pool's per-zone budget.
	MaxSurge       int
	MaxUnavailable int
	// Groups are the pool's instance groups when the upgrade started, in
	// the order zones are upgraded (one zone after another).
	Groups []InstanceGroup
	// RollingBack is set by a rollback command on a surge pool: nothing
	// new goes forward, and every node this upgrade replaced is replaced
	// again at the version before it (NodeTask.Rollback).
	RollingBack bool
	// BlueGreen is a blue/green pool's phase track (bluegreen.go).
	BlueGreen *BlueGreenTrack
	// MaxFailedNodes is the pool's failure budget (0: upgrades laid out
	// before StepLayoutGates, where a failed node holds the pool until it
	// is retried); RollbackPolicy what the pool does past it; Gates the
	// PromQL gates its nodes' NodeGates step checks (the pool's and the
	// cluster's).
	MaxFailedNodes int
	RollbackPolicy string
	Gates          []HealthGate
	// FailReason says why the pool failed (its failure budget was
	// reached); set once, kept while a rollback runs.
	FailReason string
}

// Upgrade is the replicated record of one cluster upgrade. Every field that
// decides what happens next lives here, so a new leader continues from it.
type Upgrade struct {
	ID        string
	Cluster   string
	From      Version
	To        Version
	Options   Options
	State     UpgradeState
	CreatedAt time.Time
	// FinishedAt is set when State leaves running.
	FinishedAt time.Time
	// PauseReason says why nothing new starts (a maintenance window closed,
	// an exclusion began); in-flight nodes finish regardless.
	PauseReason string
	PausedAt    time.Time
	// ResumedAt is when the upgrade last left a pause.
	ResumedAt time.Time
	// Preflight is the preflight run the upgrade waits for (state
	// preflight) or was started on; empty for upgrades started before
	// preflight was part of the upgrade.
	Preflight string
	// RefusedChecks are the blocking checks of a refused upgrade's
	// preflight, sorted.
	RefusedChecks []string
	Steps         []Step
	Pools         []PoolTrack
	// Nodes are grouped by pool in the order of Pools; inside a pool in the
	// order the cluster lists them.
	Nodes []NodeTask
	// Agents are the molt step's hosts (StepLayoutMolt), pool by pool in
	// the order of the pool steps; empty when there is no molt step.
	Agents []AgentTask
	// Revision counts applied transitions; it changes whenever anything in
	// the upgrade does.
	Revision uint64
	// Closed is set on a cancelled upgrade once the cluster's shape
	// changed after it: it can no longer be resumed.
	Closed bool
	// Reason says why a failed upgrade failed.
	Reason string

	nodeIdx map[string]int
	stepIdx map[string]int
	poolIdx map[string]int
}

// ErrStale is wrapped by every refused transition: the decision was made on
// a state that has moved on, so it is dropped rather than applied.
var ErrStale = errors.New("stale transition")

func stale(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrStale, fmt.Sprintf(format, args...))
}

// UpgradeID names the n-th upgrade of a cluster to a version.
func UpgradeID(cluster string, to Version, n int) string {
	return fmt.Sprintf("%s-%s-%d", cluster, to, n)
}

// NewUpgrade lays out the upgrade of cluster c to version to. It does not
// check the version rules; callers run CheckUpgrade and friends first.
func NewUpgrade(id string, c *ClusterSpec, to Version, opts Options, now time.Time) *Upgrade {
	u := &Upgrade{
		ID: id, Cluster: c.Name, From: c.Version, To: to, Options: opts,
		State: UpgradeRunning, CreatedAt: now,
		Agents: agentHosts(c, opts),
	}
	u.Steps = buildSteps(c, opts.StepLayout, len(u.Agents) > 0)
	u.Options.AgentVersions = nil
	for _, p := range c.Pools {
		t := PoolTrack{
			Name: p.Name, Role: p.Role, NodeSteps: BareMetalNodeSteps(p.Role),
			Concurrency: p.Concurrency(), MinAvailable: p.Settings.MinimumAvailableNodes,
			First: len(u.Nodes), Count: len(p.Nodes),
		}
		nodes := p.Nodes
		if p.Backing == BackingMIG {
			if opts.StepLayout < StepLayoutMIG {
				// Laid out before MIG strategies existed: kept so old
				// logs replay to the upgrades they described.
				t.NodeSteps = SurgeNodeSteps()
			} else {
				nodes = layoutMIG(&t, &p, now)
			}
		}
		if opts.StepLayout >= StepLayoutGates {
			layoutHealth(&t, &p, c)
		}
		u.Pools = append(u.Pools, t)
		for _, n := range nodes {
			u.Nodes = append(u.Nodes, NodeTask{Node: n.Name, Pool: p.Name, Zone: n.Zone, State: StatePending, Version: c.Version})
		}
	}
	u.BuildIndex()
	return u
}

// index makes sure the lookup indexes exist. They are built when an
// upgrade is made or converted; building here only serves values
// assembled by hand (tests), which are not shared between goroutines.
func (u *Upgrade) index() {
	if u.nodeIdx == nil {
		u.BuildIndex()
	}
}

// BuildIndex builds the lookup indexes of the steps, pools and nodes. Code
// that assembles an Upgrade field by field from another format (the wire
// types of package api, the state machine's persisted types) calls it once
// the value is complete and before it is shared: readers such as Decide,
// which the coordinator runs under a read lock, then never write.
func (u *Upgrade) BuildIndex() {
	u.nodeIdx = make(map[string]int, len(u.Nodes))
	for i := range u.Nodes {
		u.nodeIdx[u.Nodes[i].Node] = i
	}
	u.stepIdx = make(map[string]int, len(u.Steps))
	for i := range u.Steps {
		u.stepIdx[u.Steps[i].ID] = i
	}
	u.poolIdx = make(map[string]int, len(u.Pools))
	for i := range u.Pools {
		u.poolIdx[u.Pools[i].Name] = i
	}
}

// Node returns the node's task.
func (u *Upgrade) Node(name string) (*NodeTask, bool) {
	u.index()
	i, ok := u.nodeIdx[name]
	if !ok {
		return nil, false
	}
	return &u.Nodes[i], true
}

// Step returns the step of that ID.
func (u *Upgrade) Step(id string) (*Step, bool) {
	u.index()
	i, ok := u.stepIdx[id]
	if !ok {
		return nil, false
	}
	return &u.Steps[i], true
}

// Pool returns the pool track of that name.
func (u *Upgrade) Pool(name string) (*PoolTrack, bool) {
	u.index()
	i, ok := u.poolIdx[name]
	if !ok {
		return nil, false
	}
	return &u.Pools[i], true
}

// PoolNodes returns the pool's node tasks (a slice of Nodes).
func (u *Upgrade) PoolNodes(p *PoolTrack) []NodeTask { return u.Nodes[p.First : p.First+p.Count] }

// CurrentStep returns the node step a running node is at.
func (u *Upgrade) CurrentStep(n *NodeTask) (NodeStep, bool) {
	p, ok := u.Pool(n.Pool)
	steps := p.steps(n.Path)
	if !ok || n.Cursor < 0 || n.Cursor >= len(steps) {
		return NodeStep{}, false
	}
	return steps[n.Cursor], true
}

// OperationID is the deterministic ID of the agent operation a node runs at
// a cursor and attempt. The same decision always yields the same ID; a
// retry yields a new one.
func (u *Upgrade) OperationID(node string, cursor, attempt int) string {
	return fmt.Sprintf("%s/%s/%d/a%d", u.ID, node, cursor, attempt)
}

// RollbackOperationID is OperationID for the steps that take a node back
// to the upgrade's From version.
func (u *Upgrade) RollbackOperationID(node string, cursor, attempt int) string {
	return fmt.Sprintf("%s/%s/rollback/%d/a%d", u.ID, node, cursor, attempt)
}

// VersionCounts returns how many nodes run each version.
func (u *Upgrade) VersionCounts() map[Version]int {
	m := map[Version]int{}
	for i := range u.Pools {
		for v, c := range u.PoolVersionCounts(&u.Pools[i]) {
			m[v] += c
		}
	}
	return m
}

// PoolVersionCounts returns how many of a pool's nodes run each version:
// every node task at its version, except that a blue/green pool's blue
// nodes are gone once blue is deleted, and its green nodes run the target.
func (u *Upgrade) PoolVersionCounts(p *PoolTrack) map[Version]int {
	m := map[Version]int{}
	bg := p.BlueGreen
	if bg == nil || bg.Phase != PhaseCompleted {
		for _, n := range u.PoolNodes(p) {
			m[n.Version]++
		}
	}
	if bg != nil && bg.Phase != PhaseRolledBack {
		if g := len(bg.GreenNodes()); g > 0 {
			m[u.To] += g
		}
	}
	return m
}

// LiveNodes are the names of the machines that stand for the upgrade's
// nodes now: surge replacements for the nodes they replaced, green nodes
// for a blue/green pool whose blue was deleted.
func (u *Upgrade) LiveNodes() []string {
	var out []string
	for i := range u.Pools {
		p := &u.Pools[i]
		if bg := p.BlueGreen; bg != nil && bg.Phase == PhaseCompleted {
			for _, n := range bg.GreenNodes() {
				out = append(out, n.Name)
			}
			continue
		}
		for _, n := range u.PoolNodes(p) {
			out = append(out, n.Live())
		}
	}
	return out
}

// Active reports whether the upgrade is running its steps.
func (u *Upgrade) Active() bool { return u.State == UpgradeRunning }

// InProgress reports whether the upgrade has not ended: it waits for its
// preflight or runs. Another upgrade, or a change of the cluster's shape,
// must wait for it.
func (u *Upgrade) InProgress() bool { return u.State == UpgradePreflight || u.State == UpgradeRunning }

// runningPool returns a pool whose step runs in a running upgrade.
func (u *Upgrade) runningPool(name string) (*PoolTrack, *Step, error) {
	if u.State != UpgradeRunning {
		return nil, nil, stale("upgrade %s is %s", u.ID, u.State)
	}
	p, ok := u.Pool(name)
	if !ok {
		return nil, nil, stale("no pool %s", name)
	}
	s, ok := u.Step(PoolStepID(name))
	if !ok || s.State != StateRunning {
		return nil, nil, stale("pool step of %s is not running", name)
	}
	return p, s, nil
}

func depsDone(u *Upgrade, s *Step) bool {
	for _, d := range s.Deps {
		ds, ok := u.Step(d)
		if !ok || ds.State != StateDone {
			return false
		}
	}
	return true
}
