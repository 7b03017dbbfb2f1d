package schedule

import (
	"time"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// Release channels (SPEC §14). A cluster subscribes to one of the three,
// or to none.
const (
	ChannelRapid   = "rapid"
	ChannelRegular = "regular"
	ChannelStable  = "stable"
	// ChannelNone, like an empty channel, means manual upgrades only.
	ChannelNone = "none"
)

// Channels are the channel names a catalog may define, in order of
// freshness.
var Channels = []string{ChannelRapid, ChannelRegular, ChannelStable}

// KnownChannel reports whether name is one of Channels.
func KnownChannel(name string) bool {
	for _, c := range Channels {
		if c == name {
			return true
		}
	}
	return false
}

// Subscribed reports whether a cluster whose spec names channel follows a
// release channel (is upgraded automatically).
func Subscribed(channel string) bool { return KnownChannel(channel) }

// Backoff after a failed automatic attempt: BackoffBase after the first,
// doubling after each further failure in a row, never more than
// BackoffMax.
const (
	BackoffBase = time.Hour
	BackoffMax  = 24 * time.Hour
)

// Backoff is the wait after the n-th failed automatic attempt in a row
// (n ≥ 1): BackoffBase·2^(n-1), capped at BackoffMax.
func Backoff(n int) time.Duration {
	if n <= 1 {
		return BackoffBase
	}
	d := BackoffBase
	for i := 1; i < n && d < BackoffMax; i++ {
		d *= 2
	}
	return min(d, BackoffMax)
}

// Channel is a release channel's entry in the catalog.
type Channel struct {
	Name string
	// Default is the version the channel offers new clusters; it only
	// paces catch-up (a cluster more than one minor behind it moves one
	// minor per month). Zero: none.
	Default phases.Version
	// Target is the channel's auto-upgrade target: subscribed clusters
	// are upgraded towards it. Zero: nothing is upgraded automatically.
	Target phases.Version
}

// Catalog is what the scheduler reads of the release catalog.
type Catalog struct {
	// Versions are the catalog's releases, oldest first.
	Versions []phases.Version
	// EndOfSupport is, per minor (1.N → N), the latest end-of-support
	// date among the catalog's releases of that minor; absent or zero:
	// unknown.
	EndOfSupport map[int]time.Time
	// Channels by name.
	Channels map[string]Channel
}

// Upgrade is what the scheduler reads of a cluster's current or last
// upgrade.
type Upgrade struct {
	ID           string
	From, To     phases.Version
	State        phases.UpgradeState
	Automatic    bool
	EndOfSupport bool
	// PauseReason is set while the upgrade waits for its window (or an
	// exclusion) to let the next step start.
	PauseReason string
	FinishedAt  time.Time
	// RefusedChecks are a refused upgrade's blocking preflight checks.
	RefusedChecks []string
	// Mixed is set on a cancelled upgrade that left nodes at To: until
	// it is finished (or rolled back) no other version may be targeted.
	Mixed bool
}

// InProgress reports whether the upgrade has not ended.
func (u *Upgrade) InProgress() bool {
	return u != nil && (u.State == phases.UpgradePreflight || u.State == phases.UpgradeRunning)
}

// Outcomes of an automatic attempt.
const (
	OutcomeDone      = "done"
	OutcomeRefused   = "refused"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
)

// Attempt is one automatic upgrade the scheduler started, and what came
// of it. It is the record an audit log entry is made from: who (the
// scheduler), what (From → To), why (Reason) and when.
type Attempt struct {
	// Upgrade is the ID of the upgrade the attempt started.
	Upgrade  string
	From, To phases.Version
	// Kind is maintenance.KindPatch or KindMinor.
	Kind maintenance.ChangeKind
	// Reason says why the scheduler started it, in words.
	Reason string
	// EndOfSupport is set when the attempt was forced through windows and
	// exclusions because its minor had passed its end of support.
	EndOfSupport bool
	StartedAt    time.Time
	// Outcome is empty until the attempt's end is recorded; then one of
	// the Outcome* constants.
	Outcome    string
	FinishedAt time.Time
	// Detail explains a failed outcome (the refusing checks).
	Detail string
}

// State is a cluster's replicated auto-upgrade record.
type State struct {
	// Failures counts the automatic attempts in a row that did not
	// finish (refused by preflight, failed or cancelled).
	Failures int
	// NextAttempt is when the backoff after the last failure ends: no
	// automatic upgrade starts before it. Zero: no backoff.
	NextAttempt time.Time
	// LastMinorAt is when the last automatic minor upgrade that finished
	// started: catch-up moves one minor per maintenance.CatchUpInterval
	// from it.
	LastMinorAt time.Time
	// Last is the last automatic attempt (nil: none yet).
	Last *Attempt
	// HeldUntil is when the cluster's registration hold ends: a cluster
	// registered without a maintenance policy is not started on
	// automatically before then, so its operator has the chance to give
	// one (or to take it off its channel). Zero: no hold. Storing a
	// policy ends it at once.
	HeldUntil time.Time
}

// Cluster is what the scheduler reads of one cluster.
type Cluster struct {
	Name    string
	Kind    phases.ClusterKind
	Admin   string
	Channel string
	// Current is the version the whole cluster runs (status.version).
	Current phases.Version
	// Policy is the compiled maintenance policy; nil with PolicyInvalid
	// false means none (always open).
	Policy *maintenance.Compiled
	// PolicyInvalid is set when the stored policy no longer compiles: the
	// cluster is treated as outside its window (fail closed).
	PolicyInvalid bool
	// Upgrade is the cluster's current or last upgrade (nil: none).
	Upgrade *Upgrade
	// Ended is the outcome of the upgrade of Auto.Last when it has ended
	// and is no longer Upgrade (found in the history); nil otherwise.
	Ended *Upgrade
	Auto  State
	// Drift lists the nodes whose observed versions (their agents'
	// reports) differ from molt's record, by node name, each with what
	// differs: no automatic upgrade starts on a cluster that does not run
	// what molt believes, since its plan would start from a wrong version.
	Drift map[string]string
	// Labels are the cluster's labels (rollout sequences select stages
	// by them).
	Labels map[string]string
	// Past are the cluster's ended upgrades, oldest first (From, To,
	// State and FinishedAt are read): when it reached a version, and
	// which upgrades to it failed (rollout sequences). Read only for a
	// cluster in a sequence.
	Past []Upgrade
	// Seq is the cluster's upgrade count when the fleet was read: the
	// basis a start decision carries to the state machine, which refuses
	// it once another upgrade has started. The scheduler does not read it.
	Seq int
}

// Limits bound how many clusters upgrade at once.
type Limits struct {
	// PerFamily bounds the upgrades (automatic or not) in progress at
	// once in a family: an admin (or hybrid) cluster and the user
	// clusters it manages; a standalone cluster is a family of its own.
	// 0 means DefaultPerFamily.
	PerFamily int
	// Fleet bounds the upgrades in progress at once in the whole fleet;
	// 0 means no bound beyond PerFamily.
	Fleet int
}

// DefaultPerFamily is the default of Limits.PerFamily.
const DefaultPerFamily = 1

// Fleet is the scheduler's whole input.
type Fleet struct {
	Catalog  Catalog
	Clusters []Cluster
	Limits   Limits
	// Sequences are the rollout sequences (sequence.go), by name.
	Sequences []Sequence
}

// StatusState says where a cluster stands with automatic upgrades.
type StatusState string

// Status states (SPEC §14), plus two this package adds: starting (an
// upgrade may start now; the leader starts it on its next pass) and
// blocked-by-rule (a version rule, the admin/user skew, the catch-up pace
// or a concurrency limit holds it back).
const (
	StateUpToDate          StatusState = "up-to-date"
	StateManualOnly        StatusState = "manual-only"
	StateWaitingForWindow  StatusState = "waiting-for-window"
	StateBlockedExclusion  StatusState = "blocked-by-exclusion"
	StatePreflightFailed   StatusState = "preflight-failed"
	StateBackoff           StatusState = "backoff"
	StateRunning           StatusState = "running"
	StatePausedAtWindowEnd StatusState = "paused-at-window-end"
	StateBlockedByRule     StatusState = "blocked-by-rule"
	StateStarting          StatusState = "starting"
)

// BlockKind says what kind of thing holds an upgrade back.
type BlockKind string

// Block kinds.
const (
	BlockWindow    BlockKind = "window"
	BlockExclusion BlockKind = "exclusion"
	BlockRule      BlockKind = "rule"
	BlockCheck     BlockKind = "check"
	BlockSkew      BlockKind = "skew"
	// BlockDrift names a node whose observed versions differ from what
	// molt recorded for it (phases.RuleVersionDrift).
	BlockDrift BlockKind = "drift"
)

// Rules a BlockRule names.
const (
	RuleBackoff       = "backoff"
	RuleCatchUpPace   = "catch-up-pace"
	RuleFamilyLimit   = "family-concurrency"
	RuleFleetLimit    = "fleet-concurrency"
	RuleNoRelease     = "no-release"
	RuleMixedCluster  = "mixed-cluster"
	RulePolicyInvalid = "policy-invalid"
	RuleVersion       = "version-rules"
	RuleNoOpportunity = "no-opportunity"
	// RuleRegistrationHold holds a cluster registered without a
	// maintenance policy until State.HeldUntil.
	RuleRegistrationHold = "registration-hold"
)

// Block is one thing that holds an upgrade back.
type Block struct {
	Kind BlockKind
	// Name is the exclusion's name, "window", the rule, the check's ID or
	// the other cluster of a skew.
	Name string
	// Until is when it stops holding (zero: unknown).
	Until time.Time
	// Detail says it in words.
	Detail string
}

// Status answers "why is this cluster (not) upgrading?".
type Status struct {
	Channel string
	Current phases.Version
	// Target is the channel's auto-upgrade target (zero: none).
	Target phases.Version
	// Next is the next step towards Target, or the step an end of
	// support forces (then at NextOpportunity, when it is still ahead);
	// zero when there is none.
	Next phases.Version
	// EndOfSupport is when the current minor reaches (or reached) its end
	// of support (zero: unknown).
	EndOfSupport time.Time
	// Forced is set when Next is the step an end of support forces
	// through windows, exclusions and the catch-up pace: at EndOfSupport,
	// or as soon as nothing else holds it once past it.
	Forced bool
	State  StatusState
	// BlockedBy lists everything that holds the next step back now, each
	// with its own Until; State names the first (see blockers).
	BlockedBy []Block
	// NextOpportunity is the earliest instant the next step may start,
	// as far as the window, the exclusions, the backoff and the catch-up
	// pace can tell, or the end of support that will force it (zero: now,
	// or unknown).
	NextOpportunity time.Time
	// NextAttempt is when the backoff ends (zero: no backoff).
	NextAttempt time.Time
	// LastAttempt is the last automatic attempt, with its outcome.
	LastAttempt *Attempt
	// Sequence says where the cluster stands in its rollout sequence for
	// Next (nil: in no sequence, or no next step).
	Sequence *SequenceWait
	// Message says it all in one sentence.
	Message string
}

// Action is what the scheduler decides for a cluster.
type Action string

// Actions.
const (
	// ActNone: nothing to commit.
	ActNone Action = ""
	// ActStart: start an automatic upgrade to Decision.To.
	ActStart Action = "start"
	// ActRecord: record the outcome of the last automatic attempt
	// (Decision.Outcome) and the backoff it sets.
	ActRecord Action = "record"
)

// Decision is the scheduler's answer for one cluster.
type Decision struct {
	Cluster string
	Action  Action
	// To, Kind, EndOfSupport and Reason describe a start.
	To           phases.Version
	Kind         maintenance.ChangeKind
	EndOfSupport bool
	// SequenceBypassed: the start is forced by an end of support past a
	// stage of the cluster's rollout sequence that is not done.
	SequenceBypassed bool
	Reason           string
	// Record is the attempt's record as ActRecord stores it, and State
	// the cluster's auto-upgrade state after it.
	Record *Attempt
	State  State
	Status Status
	// Wake is the earliest instant this decision changes by itself (zero:
	// only events change it).
	Wake time.Time
}
