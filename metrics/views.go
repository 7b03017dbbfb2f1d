package metrics

import "time"

// StepView is one step of a cluster upgrade (SPEC §4) as the metrics see it.
type StepView struct {
	// Name is the step's stable identifier, e.g. "control_plane_lb",
	// "control_plane", "addons", "lifecycle", "load_balancer",
	// "workers", "health_checks". It becomes the step label.
	Name string
	// State is one of StepStates; anything else is exported as "unknown".
	State string
	// StartedAt is when the step last began running: for a step resumed
	// after a pause, the time it resumed, so that the stuck-step alert
	// measures the current run and not the time spent waiting for a
	// window. Zero when the step has not started; then no timestamp
	// series is exported.
	StartedAt time.Time
	// Expected is the step's predicted duration from the dry-run plan
	// (SPEC §4). Zero when unknown; the stuck-step alert then falls back
	// to a fixed threshold.
	Expected time.Duration
}

// PoolView is the upgrade progress of one node pool.
type PoolView struct {
	Name string
	// Role is the pool role (controlPlaneLB, controlPlane, loadBalancer,
	// worker); exported on molt_pool_info.
	Role string
	// Phase is one of PoolPhases; anything else is exported as "unknown".
	Phase string
	// NodesTotal counts the pool's nodes; the three counters below are
	// subsets of it and the rest are exported as state="pending".
	NodesTotal     int
	NodesDone      int
	NodesUpgrading int
	NodesFailed    int
	// Waiting counts the pool's steps waiting for the cloud, by reason
	// (CloudWaitReasons); exported for MIG pools (Cloud true) only.
	Cloud   bool
	Waiting map[string]int
	// Gates are the names of the pool's health gates (built-in checks and
	// PromQL gates; none for upgrades laid out before gates), and Red
	// counts, by gate, the nodes waiting on it red. MaxFailedNodes is the
	// pool's failure budget (0: none, not exported).
	Gates          []string
	Red            map[string]int
	MaxFailedNodes int
}

// ClusterView is one cluster's versions and upgrade progress.
type ClusterView struct {
	Name string
	// Version is status.version, what the cluster fully runs;
	// TargetVersion is spec.version (equal to Version when idle).
	Version, TargetVersion string
	// Phase is one of ClusterPhases; anything else is exported as "unknown".
	Phase string
	// PauseReason is a short code saying why a paused upgrade waits
	// (e.g. "window_closed", "exclusion", "operator"). Used only while
	// Phase is "paused".
	PauseReason string
	Steps       []StepView
	Pools       []PoolView
	// NodesPerVersion maps a kubelet version to the number of nodes
	// running it (status.versions).
	NodesPerVersion map[string]int
	// SkewViolation is true while the version rules of SPEC §3 (skew
	// between admin and user clusters, or inside the cluster) are broken.
	SkewViolation bool
	// EndOfSupport is the end-of-support date of the cluster's current
	// minor; zero when unknown (no series is exported then).
	EndOfSupport time.Time
	// MinorBlockedPastEOS is true when the maintenance policy (window and
	// exclusions) gives a minor upgrade of the control plane no chance
	// before the end of support of the cluster's minor. It says nothing of
	// patches: the catalog does not mark which release fixes a
	// vulnerability, so no gauge could know that a patch is a required
	// security patch (docs/observability.md).
	MinorBlockedPastEOS bool
	// AutoUpgradeState is where the cluster stands with automatic
	// upgrades (SPEC §14: one of AutoUpgradeStates); AutoUpgradeFailures
	// counts its automatic attempts in a row that did not finish, and
	// AutoUpgradeNextAttempt is when their backoff ends (zero: none; no
	// series then).
	AutoUpgradeState       string
	AutoUpgradeFailures    int
	AutoUpgradeNextAttempt time.Time
	// EndOfSupportUpgrade is when the end of support forces the cluster's
	// next minor upgrade (on any channel or none): the end of support, or
	// the backoff's end when later; zero (no series) when none is due or
	// the forced upgrade runs.
	EndOfSupportUpgrade time.Time
}

// AgentView is the liveness of one node's agent as the coordinator sees it.
type AgentView struct {
	Cluster, Node string
	// LastSeen is the time of the last heartbeat; zero if never seen (then
	// no age series is exported, only molt_agent_missing).
	LastSeen time.Time
	// Missing is the coordinator's verdict that the agent is gone (its
	// heartbeat is older than the coordinator's threshold).
	Missing bool
	// Drift: the versions the agent reports differ from molt's record of
	// the node (api.AgentStatus.Drift).
	Drift bool
}

// RaftView is this coordinator member's Raft state.
type RaftView struct {
	// State is the hashicorp/raft state name (Follower, Candidate, Leader,
	// Shutdown); matched case-insensitively to RaftStates.
	State                                      string
	Term, LastIndex, CommitIndex, AppliedIndex uint64
	// Leader is true when this member is the leader. It gates the export
	// of cluster and agent state (see NewCoordinatorCollector).
	Leader bool
	// HasLeader is true when this member knows a current leader.
	HasLeader bool
	// Halted is true when this member stopped applying the log, which its
	// release cannot read (raftstore.HaltInfo), at HaltedIndex.
	Halted      bool
	HaltedIndex uint64
	// Members is every coordinator member with the release it runs, as
	// this member knows it; exported by the leader only.
	Members []MemberView
}

// SequenceView is how far one version has gone through one rollout
// sequence (molt_rollout_sequence_*).
type SequenceView struct {
	Sequence, Version string
	// Reached is the number of stages done with the version: the index
	// of the stage it waits in.
	Reached int
	// Held: a failed upgrade to the version holds the stages after the
	// one it failed in.
	Held bool
	// SoakEnds is when the soak of the stage it waits in ends, once all
	// that stage's clusters run it (zero otherwise).
	SoakEnds time.Time
}

// MemberView is one coordinator member's release (molt_member_info).
type MemberView struct {
	ID, Version, Source string
}

// Source is what the coordinator collector reads at every scrape. The
// methods must be cheap and safe for concurrent use; they return copies.
type Source interface {
	ClustersView() []ClusterView
	// SequencesView is every version in play in every rollout sequence.
	SequencesView() []SequenceView
	AgentsView() []AgentView
	RaftView() RaftView
	// Now is the coordinator's clock; ages are computed against it.
	Now() time.Time
}
