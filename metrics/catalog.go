package metrics

// Type is a Prometheus metric type.
type Type string

// The metric types molt uses.
const (
	Gauge     Type = "gauge"
	Counter   Type = "counter"
	Histogram Type = "histogram"
)

// Exporter says which process exports a metric.
type Exporter string

// The processes that export metrics.
const (
	// ExporterCoordinator metrics come from every coordinator member;
	// cluster and agent state only from the leader.
	ExporterCoordinator Exporter = "coordinator"
	// ExporterAgent metrics come from molt-agent on each host.
	ExporterAgent Exporter = "agent"
)

// Info describes one exported metric. Catalog is the single source of
// names, help texts and label names: the collector and recorders build their
// descriptors from it, and the tests check rules, dashboard and docs
// against it.
type Info struct {
	Name     string
	Type     Type
	Labels   []string
	Help     string
	Exporter Exporter
}

// Metric names. Constants so that code and tests cannot misspell them.
const (
	ClusterInfo                 = "molt_cluster_info"
	ClusterUpgradePhase         = "molt_cluster_upgrade_phase"
	MaintenancePaused           = "molt_maintenance_paused"
	UpgradeStepState            = "molt_upgrade_step_state"
	UpgradeStepStarted          = "molt_upgrade_step_started_timestamp_seconds"
	UpgradeStepExpected         = "molt_upgrade_step_expected_duration_seconds"
	PoolInfo                    = "molt_pool_info"
	PoolUpgradePhase            = "molt_pool_upgrade_phase"
	PoolNodes                   = "molt_pool_nodes"
	PoolCloudWaiting            = "molt_pool_cloud_waiting"
	PoolGateRed                 = "molt_pool_health_gate_red"
	PoolFailedNodesBudget       = "molt_pool_max_failed_nodes"
	ClusterNodes                = "molt_cluster_nodes"
	ClusterSkewViolation        = "molt_cluster_version_skew_violation"
	ClusterEndOfSupport         = "molt_cluster_end_of_support_timestamp_seconds"
	ClusterBlockedPastEOS       = "molt_cluster_minor_blocked_past_end_of_support"
	ClusterAutoUpgradeState     = "molt_cluster_auto_upgrade_state"
	ClusterAutoUpgradeFailures  = "molt_cluster_auto_upgrade_failures"
	ClusterAutoUpgradeNext      = "molt_cluster_auto_upgrade_next_attempt_timestamp_seconds"
	ClusterEndOfSupportUpgrade  = "molt_cluster_end_of_support_upgrade_timestamp_seconds"
	SequenceStage               = "molt_rollout_sequence_stage"
	SequenceHeld                = "molt_rollout_sequence_held"
	SequenceSoakEnd             = "molt_rollout_sequence_soak_end_timestamp_seconds"
	AgentLastSeenAge            = "molt_agent_last_seen_age_seconds"
	AgentMissing                = "molt_agent_missing"
	NodeVersionDrift            = "molt_node_version_drift"
	RaftState                   = "molt_raft_state"
	RaftTerm                    = "molt_raft_term"
	RaftLastLogIndex            = "molt_raft_last_log_index"
	RaftCommitIndex             = "molt_raft_commit_index"
	RaftAppliedIndex            = "molt_raft_applied_index"
	RaftHasLeader               = "molt_raft_has_leader"
	RaftHalted                  = "molt_raft_halted"
	RaftHaltedIndex             = "molt_raft_halted_index"
	NodeUpgradeDuration         = "molt_node_upgrade_duration_seconds"
	NodeUpgradesTotal           = "molt_node_upgrades_total"
	DrainDuration               = "molt_drain_duration_seconds"
	DrainTimeoutsTotal          = "molt_drain_timeouts_total"
	DrainPodsLeftBehindTotal    = "molt_drain_pods_left_behind_total"
	PreflightChecksTotal        = "molt_preflight_checks_total"
	RaftCommitDuration          = "molt_raft_commit_duration_seconds"
	RaftLeaderChangesTotal      = "molt_raft_leader_changes_total"
	HandshakesRefusedTotal      = "molt_tls_handshakes_refused_total"
	BuildInfo                   = "molt_build_info"
	MemberInfo                  = "molt_member_info"
	AgentOperationsReported     = "molt_agent_operations_reported_total"
	NodeRollbacksTotal          = "molt_node_rollbacks_total"
	HealthGateChecksTotal       = "molt_health_gate_checks_total"
	AgentOperationsTotal        = "molt_agent_operations_total"
	AgentOperationDuration      = "molt_agent_operation_duration_seconds"
	AgentHeartbeatLastSuccess   = "molt_agent_last_heartbeat_success_timestamp_seconds"
	AgentHeartbeatFailuresTotal = "molt_agent_heartbeat_failures_total"
	AgentArtifactBytesTotal     = "molt_agent_artifact_bytes_total"
)

// Fixed value sets of the one-hot state metrics. Every set ends in
// "unknown" so that a value the coordinator invents later still yields
// exactly one series at 1 instead of none.
var (
	ClusterPhases = []string{"idle", "preflight", "refused", "running", "paused", "done", "failed", "cancelled", Unknown}
	// StepStates are a step's states; a pool step may end "cancelled"
	// (resumable) or "rolled_back" (final).
	StepStates = []string{"pending", "running", "paused", "done", "failed", "cancelled", "rolled_back", Unknown}
	// PoolPhases covers bare-metal and surge pools (pending → running →
	// done) and the blue/green phases of SPEC §7.
	PoolPhases = []string{
		"pending", "running", "paused", "cancelled", "rolling_back", "rolled_back", "done", "failed",
		"creating_green", "cordoning_blue", "draining_blue", "soaking", "deleting_blue",
		Unknown,
	}
	RaftStates = []string{"follower", "candidate", "leader", "shutdown", Unknown}
	// AutoUpgradeStates are where a cluster stands with automatic
	// upgrades (GET /v1/clusters/{name}/upgrade-status).
	AutoUpgradeStates = []string{"up-to-date", "manual-only", "waiting-for-window", "blocked-by-exclusion", "preflight-failed",
		"backoff", "running", "paused-at-window-end", "blocked-by-rule", "starting", Unknown}
	// CloudWaitReasons are why a MIG pool's steps wait for the cloud.
	CloudWaitReasons = []string{"quota", "stockout"}
	// Listeners are the coordinator's TLS listeners and HandshakeReasons
	// why one closed a connection before its handshake finished
	// (internal/tlsaccept).
	Listeners        = []string{"api", "raft"}
	HandshakeReasons = []string{"limit", "timeout", "failed"}
	// PoolNodeStates partition a pool's nodes; they sum to its size.
	PoolNodeStates = []string{"pending", "upgrading", "done", "failed"}
)

// Unknown stands for a state value outside its fixed set.
const Unknown = "unknown"

// Result label values.
const (
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
)

var catalog = []Info{
	// Cluster and upgrade state (coordinator leader, scrape time).
	{ClusterInfo, Gauge, []string{"cluster", "version", "target_version"}, "Always 1; labels carry the cluster's current (status) and target (spec) version.", ExporterCoordinator},
	{ClusterUpgradePhase, Gauge, []string{"cluster", "phase"}, "1 for the cluster's current upgrade phase, 0 for the others.", ExporterCoordinator},
	{MaintenancePaused, Gauge, []string{"cluster", "reason"}, "1 while the cluster's upgrade is paused, with the reason; 0 with reason=\"\" otherwise.", ExporterCoordinator},
	{UpgradeStepState, Gauge, []string{"cluster", "step", "state"}, "1 for the step's current state, 0 for the others.", ExporterCoordinator},
	{UpgradeStepStarted, Gauge, []string{"cluster", "step"}, "Unix time the step last began running (resumed steps: when they resumed).", ExporterCoordinator},
	{UpgradeStepExpected, Gauge, []string{"cluster", "step"}, "Predicted duration of the step from the dry-run plan, when known.", ExporterCoordinator},
	{PoolInfo, Gauge, []string{"cluster", "pool", "role"}, "Always 1; labels carry the pool's role.", ExporterCoordinator},
	{PoolUpgradePhase, Gauge, []string{"cluster", "pool", "phase"}, "1 for the pool's current upgrade phase, 0 for the others.", ExporterCoordinator},
	{PoolNodes, Gauge, []string{"cluster", "pool", "state"}, "Nodes of the pool by upgrade state (pending, upgrading, done, failed); sums to the pool size.", ExporterCoordinator},
	{PoolGateRed, Gauge, []string{"cluster", "pool", "gate"}, "Nodes of the pool whose health gate of that name (node-ready, agent, workloads, or a PromQL gate) was red when last looked at; a red gate holds the pool.", ExporterCoordinator},
	{PoolFailedNodesBudget, Gauge, []string{"cluster", "pool"}, "The pool's failure budget in its upgrade (maxFailedNodes): the pool fails when this many of its nodes failed.", ExporterCoordinator},
	{PoolCloudWaiting, Gauge, []string{"cluster", "pool", "reason"}, "Steps of a MIG pool waiting for the cloud (reason quota or stockout): its nodes' steps, and a blue/green pool's own work.", ExporterCoordinator},
	{ClusterNodes, Gauge, []string{"cluster", "version"}, "Nodes of the cluster running each kubelet version.", ExporterCoordinator},
	{ClusterSkewViolation, Gauge, []string{"cluster"}, "1 while the cluster breaks a version skew rule, else 0.", ExporterCoordinator},
	{ClusterEndOfSupport, Gauge, []string{"cluster"}, "Unix time the cluster's current minor version reaches end of support.", ExporterCoordinator},
	{ClusterBlockedPastEOS, Gauge, []string{"cluster"}, "1 while an exclusion or window leaves no chance to upgrade the cluster's minor before its end of support.", ExporterCoordinator},
	{ClusterAutoUpgradeState, Gauge, []string{"cluster", "state"}, "1 for where the cluster stands with automatic upgrades (up-to-date, waiting-for-window, backoff, …), 0 for the others.", ExporterCoordinator},
	{ClusterAutoUpgradeFailures, Gauge, []string{"cluster"}, "Automatic upgrades of the cluster in a row that did not finish (refused by preflight, failed or cancelled); 0 after one finishes.", ExporterCoordinator},
	{ClusterAutoUpgradeNext, Gauge, []string{"cluster"}, "Unix time the backoff after the cluster's failed automatic upgrades ends; absent without a backoff.", ExporterCoordinator},
	{ClusterEndOfSupportUpgrade, Gauge, []string{"cluster"}, "Unix time the end of support forces the cluster's next minor upgrade, on any channel or none, through windows and exclusions (in the past while it is due and held by a backoff, a version rule or a limit); absent when none is due.", ExporterCoordinator},
	{SequenceStage, Gauge, []string{"sequence", "version"}, "Stages of the rollout sequence done with the version (every cluster runs it, soaked, not held): the index of the stage it waits in, the number of stages once through.", ExporterCoordinator},
	{SequenceHeld, Gauge, []string{"sequence", "version"}, "1 while a failed upgrade to the version holds the stages after the one it failed in until an operator resumes or skips that stage, else 0.", ExporterCoordinator},
	{SequenceSoakEnd, Gauge, []string{"sequence", "version"}, "Unix time the soak of the stage the version waits in ends, once all its clusters run it; absent otherwise.", ExporterCoordinator},
	{AgentLastSeenAge, Gauge, []string{"cluster", "node"}, "Seconds since the node's agent last reported.", ExporterCoordinator},
	{AgentMissing, Gauge, []string{"cluster", "node"}, "1 while the coordinator considers the node's agent missing, else 0.", ExporterCoordinator},
	{NodeVersionDrift, Gauge, []string{"cluster", "node"}, "1 while the kubelet or containerd version the node's agent reports differs from molt's record of the node (upgraded by hand, reimaged, rolled back), else 0.", ExporterCoordinator},
	// Raft (every coordinator member, scrape time).
	{RaftState, Gauge, []string{"state"}, "1 for this member's Raft state, 0 for the others.", ExporterCoordinator},
	{RaftTerm, Gauge, nil, "This member's current Raft term.", ExporterCoordinator},
	{RaftLastLogIndex, Gauge, nil, "Index of the last entry in this member's Raft log.", ExporterCoordinator},
	{RaftCommitIndex, Gauge, nil, "This member's Raft commit index.", ExporterCoordinator},
	{RaftAppliedIndex, Gauge, nil, "Index of the last entry this member's FSM applied.", ExporterCoordinator},
	{RaftHasLeader, Gauge, nil, "1 when this member knows a Raft leader, else 0.", ExporterCoordinator},
	{RaftHalted, Gauge, nil, "1 while this member has stopped applying the Raft log because it met an entry or snapshot its release cannot read (it needs a newer molt; /readyz says which), else 0.", ExporterCoordinator},
	{RaftHaltedIndex, Gauge, nil, "Index of the entry (or snapshot) this member stopped applying at; 0 when it applies.", ExporterCoordinator},
	// Events recorded by the coordinator (Recorder).
	{NodeUpgradeDuration, Histogram, []string{"cluster", "pool", "result"}, "Time to upgrade one node, cordon to uncordon.", ExporterCoordinator},
	{NodeUpgradesTotal, Counter, []string{"cluster", "pool", "result"}, "Node upgrades finished, by result (succeeded, failed).", ExporterCoordinator},
	{DrainDuration, Histogram, []string{"cluster", "pool"}, "Time spent draining one node, including drains that timed out.", ExporterCoordinator},
	{DrainTimeoutsTotal, Counter, []string{"cluster", "pool"}, "Drains that hit the drain timeout and went on with pods left behind.", ExporterCoordinator},
	{DrainPodsLeftBehindTotal, Counter, []string{"cluster", "pool", "reason"}, "Pods left on a node when its drain timed out, by reason.", ExporterCoordinator},
	{PreflightChecksTotal, Counter, []string{"cluster", "check", "result"}, "Preflight check results (pass, warn, fail).", ExporterCoordinator},
	{RaftCommitDuration, Histogram, nil, "Time from proposing a Raft command to its commit on this leader.", ExporterCoordinator},
	{RaftLeaderChangesTotal, Counter, nil, "Raft leader changes this member observed.", ExporterCoordinator},
	{BuildInfo, Gauge, []string{"version", "commit", "goversion"}, "Always 1; its labels say which molt release this binary runs (internal/version: semver, source commit, Go version). Every coordinator member and every agent exports it.", ExporterCoordinator},
	{MemberInfo, Gauge, []string{"member", "version", "source"}, "Exported by the leader only: 1 for each coordinator member, labelled with the molt release it runs as the leader knows it (source: self, member — it answered — , record, or assumed — it did not answer: 0.1.0 is assumed).", ExporterCoordinator},
	{HandshakesRefusedTotal, Counter, []string{"listener", "reason"}, "Connections this member closed before their TLS handshake finished, by listener (api, raft) and reason (limit: beyond the bound on handshakes in progress; timeout: not finished within 10 s; failed: refused or broken).", ExporterCoordinator},
	{AgentOperationsReported, Counter, []string{"kind", "result"}, "Agent operation results as reported to the coordinator.", ExporterCoordinator},
	{NodeRollbacksTotal, Counter, []string{"cluster", "pool", "result"}, "Nodes taken back to the version before the upgrade (a pool rollback), by result (succeeded, failed).", ExporterCoordinator},
	{HealthGateChecksTotal, Counter, []string{"cluster", "pool", "gate", "result"}, "Health gate checks after a node, by gate and result (green, red).", ExporterCoordinator},
	// Agent (AgentMetrics).
	{AgentOperationsTotal, Counter, []string{"kind", "result"}, "Typed operations this agent finished, by kind and result.", ExporterAgent},
	{AgentOperationDuration, Histogram, []string{"kind"}, "Time this agent spent on one operation, by kind.", ExporterAgent},
	{AgentHeartbeatLastSuccess, Gauge, nil, "Unix time of this agent's last successful heartbeat to the coordinator.", ExporterAgent},
	{AgentHeartbeatFailuresTotal, Counter, nil, "Heartbeats this agent failed to deliver.", ExporterAgent},
	{AgentArtifactBytesTotal, Counter, []string{"source"}, "Bytes of release artifacts this agent got, by source (network: fetched from the artifact server; stage: copied from its artifact stage).", ExporterAgent},
}

// Catalog returns every metric molt exports. The slice is a copy.
func Catalog() []Info {
	out := make([]Info, len(catalog))
	for i, m := range catalog {
		m.Labels = append([]string(nil), m.Labels...)
		out[i] = m
	}
	return out
}

// lookup returns the catalog entry for name; it panics on an unknown name
// because that is a programming error caught by any test that builds the
// collector or a recorder.
func lookup(name string) Info {
	for _, m := range catalog {
		if m.Name == name {
			return m
		}
	}
	panic("metrics: " + name + " missing from catalog")
}
