package coordinator

import (
	"context"
	"log/slog"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/metrics"
	"github.com/moltproject/molt/seal"
	"github.com/moltproject/molt/trust"

	"github.com/moltproject/molt/raftstore"
)

// Clock gives the leader's time (UTC by default: clock.UTC). Decisions
// receive it as a value; only the leader loop reads it. Tests inject a
// clock.Manual.
type Clock = clock.Clock

// Config configures a coordinator member.
type Config struct {
	// Raft is the replicated store's configuration (node ID, addresses,
	// data directory, bootstrap).
	Raft raftstore.Config
	// TickInterval is how often the leader re-decides without an event.
	TickInterval time.Duration
	// CA signs agents' certificates at enrollment and renewal; nil refuses
	// enrollment (trust.go).
	CA *trust.CA
	// AgentCertLifetime is how long an agent certificate is valid; 0 means
	// trust.AgentCertLifetime.
	AgentCertLifetime time.Duration
	// BootstrapAdmin, when set, is an admin API token the leader stores
	// if the state lacks it: the first credential of a new coordinator,
	// written to a file at bootstrap (trust.go).
	BootstrapAdmin *statemachine.TokenRecord
	// HeartbeatInterval is what agents are told; MissingAfter marks an agent
	// missing when no beat came for that long.
	HeartbeatInterval time.Duration
	MissingAfter      time.Duration
	// WorkRetries bounds retries of a failing cluster call (cordon, drain,
	// wait) before the node is marked failed; RetryBackoff spaces them.
	WorkRetries  int
	RetryBackoff time.Duration
	// PreflightArtifactWave bounds how many hosts of a preflight run check
	// the release's artifacts (CheckArtifacts: fetch and hash every
	// artifact) at a time; the others are offered theirs as those finish.
	// A run waits PreflightTimeout per wave. 0 means
	// DefaultPreflightArtifactWave; negative: no bound.
	PreflightArtifactWave int
	// APIUnavailableTimeout is how long a cluster call keeps being
	// repeated, RetryBackoff apart, while the API server cannot be reached
	// or answers that it is unavailable (ErrAPIUnavailable), before the
	// step fails: upgrading a control-plane LB or an API server takes the
	// API away for a while on its own (GKE on Bare Metal expects up to 1–2
	// minutes), and that is not the next node's failure. Such failures do
	// not count against WorkRetries. 0 means DefaultAPIUnavailableTimeout.
	APIUnavailableTimeout time.Duration
	// MaxConcurrentWork bounds the work items (cordon, drain, wait Ready,
	// cluster steps, preflight reports) one leadership term runs at once;
	// work beyond it is started by a later tick. 0 means
	// DefaultMaxConcurrentWork.
	MaxConcurrentWork int
	// WaitReadyTimeout bounds the wait for a node to come back Ready at
	// the new version.
	WaitReadyTimeout time.Duration
	// AddonRolloutTimeout bounds one attempt of the add-ons step: applying
	// the release's add-ons and waiting for their DaemonSets and
	// Deployments to roll out. An attempt that reaches it fails with the
	// objects still rolling out and their counts.
	AddonRolloutTimeout time.Duration
	// BackupKeep is how many etcd backups of each cluster are kept
	// (docs/backup.md); 0 means the default, 5.
	BackupKeep int
	// Keyring seals kubeconfigs before they are proposed and opens them to
	// reach their clusters (secrets.go). Every member holds the same keys.
	// nil: a kubeconfig can be neither stored nor opened, and a member
	// whose state holds sealed kubeconfigs refuses to start.
	Keyring *seal.Keyring
	// Connector reaches clusters' API servers; nil means none.
	Connector Connector
	// Clouds gives the cloud adapters of clusters' MIG pools; nil means
	// none (MIG work fails with ErrNoCloud, registration of MIG pools is
	// refused).
	Clouds CloudConnector
	// InstanceTimeout bounds a wait for instances to be created, recreated
	// or deleted; InstancePoll spaces the provider reads of that wait.
	InstanceTimeout time.Duration
	InstancePoll    time.Duration
	// CloudRetryInterval is how long a MIG step that waits for quota or
	// capacity waits before it tries again.
	CloudRetryInterval time.Duration
	// AuditMaxEntries bounds each class of the audit log's records
	// (operators' requests, agents' requests); 0 means
	// statemachine.DefaultAuditMaxEntries. AuditMaxAge, when not zero,
	// also drops records older than that (at least an hour). Both travel
	// in every audit record the leader proposes, so every member trims
	// alike; a new value applies from the next record on.
	AuditMaxEntries int
	AuditMaxAge     time.Duration
	// HealthTimeout is how long the final health step of an upgrade is
	// tried before the upgrade fails; GateTimeout how long a node's health
	// gates may stay red before the node fails (SPEC §16). Both are
	// recorded in each upgrade when it starts (phases.Options); 0 means
	// no deadline. GateInterval is how often a node's gates are looked at
	// again while they are red or soaking.
	HealthTimeout time.Duration
	GateTimeout   time.Duration
	GateInterval  time.Duration
	// AgentTimeout is how long one host's molt-agent replacement in an
	// upgrade's molt step may take, from its start until the new agent
	// reports; past it the host fails and so does the step. Recorded in
	// each upgrade when it starts; 0 means no deadline.
	AgentTimeout time.Duration
	// Gates evaluates PromQL health gates; nil means a promgate.Client
	// over http.DefaultTransport.
	Gates GateQuerier
	// AutoUpgradeLimits bound the upgrades in progress at once that the
	// scheduler starts (per family of an admin cluster, and fleet-wide);
	// zero values are the defaults (schedule.Limits).
	AutoUpgradeLimits schedule.Limits
	// SchedulerInterval is the longest the leader goes without a
	// scheduler pass; it also passes on every change of the catalog, a
	// channel, a policy or a cluster, and when a decision falls due
	// (scheduler.go). 0 means DefaultSchedulerInterval.
	SchedulerInterval time.Duration
	// RegistrationHold is how long automatic upgrades leave a cluster
	// alone after a registration that carries no maintenance policy, so
	// its operator has the chance to give one before the scheduler starts
	// on it; storing any policy ends the hold (docs/auto-upgrades.md). It
	// is recorded in the registration's entry. 0 means
	// DefaultRegistrationHold; negative: no hold.
	RegistrationHold time.Duration
	// Recorder receives event metrics (node upgrades, drains, commits);
	// nil records nothing.
	Recorder *metrics.Recorder
	// WatchdogSlack is added to the apply loop's bound before Healthy
	// calls it stalled (watchdog.go): room for what no deadline covers.
	// Under systemd it is the unit's WatchdogSec.
	WatchdogSlack time.Duration
	// ProbeMember asks the member at an HTTP address what it runs and
	// reads (GET /v1/members/self/capabilities over the members' mutual
	// TLS: httpapi.ProbeMember). The leader asks every member when its
	// term starts, when a member joins or leaves, and every
	// MemberProbeInterval (0: DefaultMemberProbeInterval). nil: the
	// leader knows only itself, and takes every other member to read
	// what molt 0.1.0 reads.
	ProbeMember         func(ctx context.Context, httpAddr string) (api.MemberSelf, error)
	MemberProbeInterval time.Duration
	// Capabilities, when set, replaces what this member says it reads
	// (tests simulate a member of another release); nil: derived from the
	// binary (BinaryCapabilities).
	Capabilities func() api.MemberCapabilities
	Clock        Clock
	Logger       *slog.Logger
}

// Defaults of the health settings (Config.HealthTimeout, GateTimeout,
// GateInterval).
const (
	DefaultHealthTimeout = 30 * time.Minute
	DefaultGateTimeout   = 10 * time.Minute
	DefaultGateInterval  = 15 * time.Second
	// DefaultAgentTimeout covers a download of the agent's binary, a
	// restart, and the rollback of a release that does not come up
	// (systemd restarts it twice, RestartSec apart, before the kept
	// binary takes over: docs/agent.md).
	DefaultAgentTimeout = 5 * time.Minute
)

// DefaultSchedulerInterval is the default of Config.SchedulerInterval.
const DefaultSchedulerInterval = time.Minute

// DefaultRegistrationHold is the default of Config.RegistrationHold: a
// working day's turn for an operator to store a policy.
const DefaultRegistrationHold = 24 * time.Hour

// DefaultMaxConcurrentWork is the default of Config.MaxConcurrentWork.
const DefaultMaxConcurrentWork = 64

// DefaultAPIUnavailableTimeout is the default of
// Config.APIUnavailableTimeout: a little over the 1–2 minutes a
// control-plane load balancer may be away at the start of an upgrade.
const DefaultAPIUnavailableTimeout = 3 * time.Minute

// DefaultAddonRolloutTimeout is the default of Config.AddonRolloutTimeout.
const DefaultAddonRolloutTimeout = 5 * time.Minute

// DefaultConfig is the embedded default: one member on loopback.
func DefaultConfig() Config {
	rc := raftstore.DefaultConfig()
	rc.NodeID = "molt-1"
	rc.RaftAddr = "127.0.0.1:7081"
	rc.HTTPAddr = "127.0.0.1:7080"
	return Config{
		Raft:                  rc,
		TickInterval:          time.Second,
		HeartbeatInterval:     10 * time.Second,
		MissingAfter:          30 * time.Second,
		WorkRetries:           3,
		RetryBackoff:          2 * time.Second,
		APIUnavailableTimeout: DefaultAPIUnavailableTimeout,
		PreflightArtifactWave: DefaultPreflightArtifactWave,
		MaxConcurrentWork:     DefaultMaxConcurrentWork,
		WaitReadyTimeout:      15 * time.Minute,
		AddonRolloutTimeout:   DefaultAddonRolloutTimeout,
		InstanceTimeout:       DefaultInstanceTimeout,
		InstancePoll:          DefaultInstancePoll,
		CloudRetryInterval:    DefaultCloudRetryInterval,
		AuditMaxEntries:       statemachine.DefaultAuditMaxEntries,
		HealthTimeout:         DefaultHealthTimeout,
		GateTimeout:           DefaultGateTimeout,
		GateInterval:          DefaultGateInterval,
		AgentTimeout:          DefaultAgentTimeout,
		SchedulerInterval:     DefaultSchedulerInterval,
		RegistrationHold:      DefaultRegistrationHold,
		MemberProbeInterval:   DefaultMemberProbeInterval,
		Clock:                 clock.UTC{},
	}
}
