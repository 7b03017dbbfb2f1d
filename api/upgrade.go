package api

import "time"

// Upgrade is one cluster upgrade as the API shows it (GET
// /v1/clusters/{name}/upgrade, and a cluster's status.upgrade): its steps,
// its pools' node step lists and every node's progress.
type Upgrade struct {
	ID      string `json:"id"`
	Cluster string `json:"cluster"`
	// From and To are release versions, "1.N.X".
	From       string         `json:"from"`
	To         string         `json:"to"`
	Options    UpgradeOptions `json:"options"`
	State      UpgradeState   `json:"state"`
	CreatedAt  time.Time      `json:"createdAt"`
	FinishedAt time.Time      `json:"finishedAt,omitzero"`
	// PauseReason says why nothing new starts; in-flight nodes finish.
	PauseReason string    `json:"pauseReason,omitempty"`
	PausedAt    time.Time `json:"pausedAt,omitzero"`
	ResumedAt   time.Time `json:"resumedAt,omitzero"`
	// Preflight is the preflight run the upgrade waits for or started on.
	Preflight string `json:"preflight,omitempty"`
	// RefusedChecks are the blocking checks of a refused upgrade's
	// preflight, sorted.
	RefusedChecks []string    `json:"refusedChecks,omitempty"`
	Steps         []Step      `json:"steps"`
	Pools         []PoolTrack `json:"pools"`
	// Nodes are grouped by pool in the order of Pools.
	Nodes []NodeTask `json:"nodes"`
	// Revision changes whenever anything in the upgrade does.
	Revision uint64 `json:"revision"`
	// Closed: the cluster changed after this upgrade was cancelled, so it
	// cannot be resumed.
	Closed bool `json:"closed,omitempty"`
	// Reason says why a failed upgrade failed: the pool past its failure
	// budget with its failed nodes, or the step that gave up, and the
	// pools that were rolled back.
	Reason string `json:"reason,omitempty"`
	// Forecast is the coordinator's estimate of when a running upgrade
	// ends, made as it answered GET .../upgrade; absent in other answers,
	// for an upgrade that is not running, and while a failed node holds
	// its pool (no estimate until it is retried).
	Forecast *UpgradeForecast `json:"forecast,omitempty"`
	// InProgress and Failing are the coordinator's reading of the
	// upgrade, so that a client shows progress without the engine's
	// rules: InProgress is set while it waits for its preflight or runs
	// (until it is done, failed, refused or cancelled); Failing says why
	// a running upgrade starts nothing new (a pool past its failure
	// budget, or a step that failed) while in-flight nodes finish.
	InProgress bool   `json:"inProgress,omitempty"`
	Failing    string `json:"failing,omitempty"`
	// Agents are the hosts of the molt step (step layout 4): each one's
	// molt-agent replacement, pool by pool in the order of the pool
	// steps; absent when the upgrade has no molt step.
	Agents []AgentTask `json:"agents,omitempty"`
}

// AgentTask is one host's molt-agent replacement in an upgrade's molt
// step: the release its agent ran when the upgrade started (From, absent
// when unknown), the release it reported once replaced (Version), and
// why it failed (Error: the deadline, a rollback, a download that did not
// verify).
type AgentTask struct {
	Node       string    `json:"node"`
	Pool       string    `json:"pool"`
	From       string    `json:"from,omitempty"`
	State      StepState `json:"state"`
	Attempt    int       `json:"attempt,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	Version    string    `json:"version,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// UpgradeForecast is when a running upgrade is expected to end: the
// planner's schedule of what is left — step order, each pool's
// concurrency, nodes in flight — timed with the upgrade's own node and
// step durations where it has them, the plan's defaults where not. A
// paused upgrade's forecast assumes it resumes at At.
type UpgradeForecast struct {
	// At is the coordinator's time when it made the forecast: End-At is
	// what is left, whatever the client's clock says.
	At  time.Time `json:"at"`
	End time.Time `json:"end"`
}

// UpgradeState is where a whole cluster upgrade is.
type UpgradeState string

// Upgrade states.
const (
	UpgradePreflight UpgradeState = "preflight"
	UpgradeRefused   UpgradeState = "refused"
	UpgradeRunning   UpgradeState = "running"
	UpgradeDone      UpgradeState = "done"
	UpgradeFailed    UpgradeState = "failed"
	UpgradeCancelled UpgradeState = "cancelled"
)

// UpgradeOptions are the choices recorded when the upgrade started.
type UpgradeOptions struct {
	Automatic             bool   `json:"automatic"`
	ConcurrentWorkerPools int    `json:"concurrentWorkerPools,omitempty"`
	EmergencyReason       string `json:"emergencyReason,omitempty"`
	// StepLayout numbers how the steps were laid out (0: with a lifecycle
	// step, as before layouts had numbers; 1: without; 2: MIG strategies;
	// 3: health gates, failure budgets and bare-metal rollback; 4: a molt
	// step that updates the agents first).
	StepLayout int `json:"stepLayout,omitempty"`
	// HealthTimeout is how long the final health step is tried before the
	// upgrade fails; GateTimeout how long a node's gates may stay red
	// before the node fails ("600s"; empty: no deadline).
	HealthTimeout string `json:"healthTimeout,omitempty"`
	GateTimeout   string `json:"gateTimeout,omitempty"`
	// EndOfSupport is set on an automatic upgrade started because the
	// cluster's minor passed its end of support: it runs through
	// maintenance windows and exclusions.
	EndOfSupport bool `json:"endOfSupport,omitempty"`
	// AgentVersion is the molt-agent release the upgrade brings every
	// host to in its molt step; AgentTimeout how long one host's
	// replacement may take until its new agent reports ("300s").
	AgentVersion string `json:"agentVersion,omitempty"`
	AgentTimeout string `json:"agentTimeout,omitempty"`
}

// StepState is where a step or a node's upgrade is.
type StepState string

// Step and node states.
const (
	StepPending StepState = "pending"
	StepRunning StepState = "running"
	StepDone    StepState = "done"
	StepFailed  StepState = "failed"
	// StepCancelled: a cancelled pool step with nothing in flight; a
	// resume runs it again.
	StepCancelled StepState = "cancelled"
	// StepRolledBack: a pool step whose rollback finished.
	StepRolledBack StepState = "rolledBack"
)

// StepKind is what a cluster upgrade step does: "pool", "addons",
// "lifecycle" or "health".
type StepKind string

// Step is one box of the upgrade's step graph (SPEC §4).
type Step struct {
	ID   string   `json:"id"`
	Kind StepKind `json:"kind"`
	// Pool and Role are set on pool steps.
	Pool       string    `json:"pool,omitempty"`
	Role       Role      `json:"role,omitempty"`
	Deps       []string  `json:"deps,omitempty"`
	State      StepState `json:"state"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	Attempts   int       `json:"attempts,omitempty"`
	Message    string    `json:"message,omitempty"`
}

// PoolTrack is a pool's part of an upgrade: the node steps every node of
// the pool goes through and the budget that bounds how many go at once.
type PoolTrack struct {
	Name         string     `json:"name"`
	Role         Role       `json:"role"`
	NodeSteps    []NodeStep `json:"nodeSteps"`
	Concurrency  int        `json:"concurrency"`
	MinAvailable int        `json:"minAvailable"`
	Cancelled    bool       `json:"cancelled,omitempty"`
	// First and Count locate the pool's nodes in Upgrade.Nodes.
	First int `json:"first"`
	Count int `json:"count"`
	// Backing and Strategy: how the pool's nodes are upgraded ("" and
	// bareMetal for in place; mig with surge or blueGreen).
	Backing  Backing `json:"backing,omitempty"`
	Strategy string  `json:"strategy,omitempty"`
	// UnavailableSteps is a surge pool's in-place path (a node's path 1);
	// RollbackSteps the path of a node that goes back without being
	// upgraded again (path 2).
	UnavailableSteps []NodeStep `json:"unavailableSteps,omitempty"`
	RollbackSteps    []NodeStep `json:"rollbackSteps,omitempty"`
	// MaxSurge and MaxUnavailable: a surge pool's per-zone budget.
	MaxSurge       int `json:"maxSurge,omitempty"`
	MaxUnavailable int `json:"maxUnavailable,omitempty"`
	// Groups are a MIG pool's groups when the upgrade started, in zone
	// order (zones go one after another).
	Groups []InstanceGroup `json:"groups,omitempty"`
	// RollingBack: a surge pool taking every node it touched back.
	RollingBack bool `json:"rollingBack,omitempty"`
	// BlueGreen is a blue/green pool's phase and progress.
	BlueGreen *BlueGreenTrack `json:"blueGreen,omitempty"`
	// MaxFailedNodes is the pool's failure budget and RollbackPolicy
	// what it does past it (auto, manual, never); Gates the PromQL gates
	// its nodes' gates step checks (the cluster's and the pool's).
	MaxFailedNodes int          `json:"maxFailedNodes,omitempty"`
	RollbackPolicy string       `json:"rollbackPolicy,omitempty"`
	Gates          []HealthGate `json:"gates,omitempty"`
	// FailReason says why the pool failed (its failure budget was
	// reached, and by which nodes).
	FailReason string `json:"failReason,omitempty"`
}

// BlueGreenTrack is where a blue/green pool upgrade is: its phase (GKE's
// names: CREATING_GREEN_POOL, CORDONING_BLUE_POOL, DRAINING_BLUE_POOL,
// NODE_POOL_SOAKING, DELETING_BLUE_POOL, ROLLBACK_STARTED; then COMPLETED
// or ROLLED_BACK), batches and soaks, and the green groups.
type BlueGreenTrack struct {
	Phase          string    `json:"phase"`
	PhaseStartedAt time.Time `json:"phaseStartedAt,omitzero"`
	// Attempt counts tries of the phase's work; Message is the latest
	// outcome; Waiting says why the work waits (quota, capacity) until
	// RetryAt.
	Attempt   int       `json:"attempt,omitempty"`
	Message   string    `json:"message,omitempty"`
	Waiting   string    `json:"waiting,omitempty"`
	RetryAt   time.Time `json:"retryAt,omitzero"`
	BatchSize int       `json:"batchSize"`
	// BatchSoak and PoolSoak are durations ("3600s").
	BatchSoak      string    `json:"batchSoak"`
	PoolSoak       string    `json:"poolSoak"`
	Batch          int       `json:"batch"`
	BatchSoakUntil time.Time `json:"batchSoakUntil,omitzero"`
	// Soaked is the soak scheduled so far (at most 7 days in all).
	Soaked        string       `json:"soaked"`
	SoakUntil     time.Time    `json:"soakUntil,omitzero"`
	Completed     bool         `json:"completed,omitempty"`
	GreenScalable bool         `json:"greenScalable,omitempty"`
	Green         []GreenGroup `json:"green,omitempty"`
	RollbackFrom  string       `json:"rollbackFrom,omitempty"`
}

// GreenGroup is a green instance group and its nodes.
type GreenGroup struct {
	Zone  string   `json:"zone"`
	Name  string   `json:"name"`
	Nodes []string `json:"nodes"`
}

// NodeStepKind is one step of a node's upgrade, e.g. "cordon", "drain",
// "operation", "waitReady", "uncordon".
type NodeStepKind string

// NodeStep is one entry of a pool's node step list; Op is set on the
// "operation" steps that dispatch an agent operation.
type NodeStep struct {
	Kind NodeStepKind `json:"kind"`
	Op   *OpSpec      `json:"op,omitempty"`
}

// OpSpec says which agent operation a node step dispatches.
type OpSpec struct {
	Kind      OperationKind `json:"kind"`
	Component string        `json:"component,omitempty"`
}

// NodeTask is one node's upgrade: a cursor over its pool's node steps.
type NodeTask struct {
	Node    string    `json:"node"`
	Pool    string    `json:"pool"`
	State   StepState `json:"state"`
	Cursor  int       `json:"cursor"`
	Attempt int       `json:"attempt"`
	// Version is what the node's kubelet runs as far as molt knows.
	Version        string    `json:"version"`
	StartedAt      time.Time `json:"startedAt,omitzero"`
	StepStartedAt  time.Time `json:"stepStartedAt,omitzero"`
	FinishedAt     time.Time `json:"finishedAt,omitzero"`
	ProtectedUntil time.Time `json:"protectedUntil,omitzero"`
	LeftBehind     []LeftPod `json:"leftBehind,omitempty"`
	Error          string    `json:"error,omitempty"`
	// Zone is the node's zone (MIG pools go zone by zone).
	Zone string `json:"zone,omitempty"`
	// Path is which of its pool's step lists the node follows: 0
	// nodeSteps, 1 unavailableSteps, 2 rollbackSteps.
	Path int `json:"path,omitempty"`
	// Replacement is the surge instance that replaces the node; Current
	// the instance that stands for it once replaced.
	Replacement string `json:"replacement,omitempty"`
	Current     string `json:"current,omitempty"`
	// Rollback: the node goes (or went) back to the upgrade's From.
	Rollback bool `json:"rollback,omitempty"`
	// Waiting says why the node's step waits (no quota, no capacity, a
	// red health gate with its last value, gates soaking), until RetryAt;
	// the node is not failed.
	Waiting string    `json:"waiting,omitempty"`
	RetryAt time.Time `json:"retryAt,omitzero"`
	// Applied are the agent operations that changed the node's components
	// on its way forward, which a rollback undoes.
	Applied []AppliedOp `json:"applied,omitempty"`
	// Drained are the controllers whose pods the node's drain evicted;
	// its gates wait until they are back to their desired ready replicas.
	Drained []Workload `json:"drained,omitempty"`
	// RedGate names the gate that was red when the node's gates step last
	// looked: the node's pool starts no other node meanwhile.
	RedGate string `json:"redGate,omitempty"`
	// GreenSince is when every gate of the node last turned green.
	GreenSince time.Time `json:"greenSince,omitzero"`
	// Step is the node step (of the list Path names) a running node is at,
	// or a failed node stopped at: "drain", "operation:UpgradeBinary:kubelet";
	// the coordinator reads it off Cursor.
	Step string `json:"step,omitempty"`
}

// AppliedOp is an agent operation that changed a component of a node
// ("kubelet", "containerd", "staticPods").
type AppliedOp struct {
	Component string `json:"component"`
	ID        string `json:"id"`
}

// Workload is a controller (Deployment, StatefulSet, ReplicaSet,
// ReplicationController) whose pods a drain evicted.
type Workload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// LeftPod is a pod a drain did not remove before its deadline.
type LeftPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Reason is "pdb", "terminating" or "protected".
	Reason      string    `json:"reason"`
	EvictableAt time.Time `json:"evictableAt,omitzero"`
}
