package api

import "time"

// Automatic upgrades (SPEC §14): the catalog's release channels and a
// cluster's answer to "why is it (not) upgrading?".

// Channel is a release channel of the catalog: rapid, regular or stable.
type Channel struct {
	Name string `json:"name"`
	// DefaultVersion is the version the channel offers new clusters: the
	// one an admin set, else the newest release that lists the channel
	// (Release.Channels). Empty: none.
	DefaultVersion string `json:"defaultVersion,omitempty"`
	// AutoUpgradeTarget is the version subscribed clusters are upgraded
	// towards, one step at a time. Empty: nothing is upgraded
	// automatically.
	AutoUpgradeTarget string `json:"autoUpgradeTarget,omitempty"`
	// UpdatedAt is when an admin last set the channel (absent: never).
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
}

// ChannelUpdate is the body of PUT /v1/channels/{name}: each version must
// be in the release catalog; an empty one unsets it. Both fields are
// required on the wire (the coordinator refuses a body that leaves one
// out, rule channel-update): a version is unset only by sending "".
type ChannelUpdate struct {
	DefaultVersion    string `json:"defaultVersion"`
	AutoUpgradeTarget string `json:"autoUpgradeTarget"`
}

// Auto-upgrade states of UpgradeStatus.State.
const (
	AutoUpToDate          = "up-to-date"
	AutoManualOnly        = "manual-only"
	AutoWaitingForWindow  = "waiting-for-window"
	AutoBlockedExclusion  = "blocked-by-exclusion"
	AutoPreflightFailed   = "preflight-failed"
	AutoBackoff           = "backoff"
	AutoRunning           = "running"
	AutoPausedAtWindowEnd = "paused-at-window-end"
	AutoBlockedByRule     = "blocked-by-rule"
	AutoStarting          = "starting"
	// AutoWaitingForStage: the next step waits for an earlier stage of
	// the cluster's rollout sequence (UpgradeStatus.Sequence says which).
	AutoWaitingForStage = "waiting-for-stage"
)

// UpgradeStatus answers why a cluster is (not) upgrading
// (GET /v1/clusters/{name}/upgrade-status).
type UpgradeStatus struct {
	Cluster string `json:"cluster"`
	// Channel is the cluster's release channel ("" or "none": manual
	// upgrades only).
	Channel string `json:"channel"`
	// Current is the version the whole cluster runs.
	Current string `json:"current"`
	// Target is the channel's auto-upgrade target; Next the next step
	// towards it (a patch of the current minor first, then the next
	// minor), the version of the upgrade in progress, or the step an end
	// of support forces (ForcedByEndOfSupport).
	Target string `json:"target,omitempty"`
	Next   string `json:"next,omitempty"`
	// EndOfSupport is when the current minor reaches (or reached) its end
	// of support, when the catalog says.
	EndOfSupport time.Time `json:"endOfSupport,omitzero"`
	// ForcedByEndOfSupport: Next is the step the end of support forces,
	// on any channel or none, through windows, exclusions and the
	// catch-up pace — at EndOfSupport (NextOpportunity), or once past it
	// as soon as the backoff, the version rules and the concurrency limits
	// allow.
	ForcedByEndOfSupport bool `json:"forcedByEndOfSupport,omitempty"`
	// State is one of the Auto* constants.
	State string `json:"state"`
	// BlockedBy lists everything that holds the next step back now, each
	// with its own Until; State names the first of them.
	BlockedBy []UpgradeBlock `json:"blockedBy"`
	// NextOpportunity is the earliest the next step may start as far as
	// the window, the exclusions, the backoff and the catch-up pace tell.
	NextOpportunity time.Time `json:"nextOpportunity,omitzero"`
	// NextAttempt is when the backoff after failed attempts ends.
	NextAttempt time.Time `json:"nextAttempt,omitzero"`
	// LastAttempt is the last automatic upgrade the scheduler started,
	// with why and how it ended.
	LastAttempt *AutoAttempt `json:"lastAttempt,omitempty"`
	// Sequence, for a cluster of a rollout sequence with a next step,
	// says where it stands: the stage it waits for, that stage's clusters
	// not at the version yet, when its soak ends, or the failure that
	// holds it.
	Sequence *SequenceWait `json:"sequence,omitempty"`
	// Message says it in one sentence.
	Message string `json:"message"`
}

// Kinds of UpgradeBlock.
const (
	BlockWindow    = "window"
	BlockExclusion = "exclusion"
	BlockRule      = "rule"
	BlockCheck     = "check"
	BlockSkew      = "skew"
	// BlockDrift names a node whose observed versions differ from molt's
	// record of it (see AgentStatus.Drift).
	BlockDrift = "drift"
	// BlockSequence names the rule of a rollout sequence that holds the
	// step (rollout-sequence, rollout-sequence-held).
	BlockSequence = "sequence"
)

// UpgradeBlock is one thing that holds an automatic upgrade back.
type UpgradeBlock struct {
	// Kind is one of the Block* constants.
	Kind string `json:"kind"`
	// Name is the exclusion's name, "window", the rule, the preflight
	// check's ID, the other cluster of a skew or the drifted node.
	Name string `json:"name"`
	// Until is when it stops holding, when known.
	Until  time.Time `json:"until,omitzero"`
	Detail string    `json:"detail,omitempty"`
}

// AutoAttempt is an automatic upgrade the scheduler started: the record an
// audit entry is made from.
type AutoAttempt struct {
	Upgrade string `json:"upgrade"`
	From    string `json:"from"`
	To      string `json:"to"`
	// Kind is "patch" or "minor".
	Kind string `json:"kind"`
	// Reason is why the scheduler started it.
	Reason string `json:"reason"`
	// EndOfSupport: forced through windows and exclusions because its
	// minor had passed its end of support.
	EndOfSupport bool      `json:"endOfSupport,omitempty"`
	StartedAt    time.Time `json:"startedAt"`
	// Outcome is empty while it runs, then done, refused, failed or
	// cancelled.
	Outcome    string    `json:"outcome,omitempty"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	Detail     string    `json:"detail,omitempty"`
}
