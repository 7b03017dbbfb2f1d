package api

import "time"

// Rollout sequences (docs/rollout-sequences.md): ordered stages of
// clusters with a soak after each; a version reaches a stage only once
// the stage before it runs it, has soaked, and no upgrade to it failed
// there.

// RolloutSequenceSpec is the body of PUT /v1/rollout-sequences/{name}: the
// stages in order. Storing replaces the stages; the resumes and skips of
// stages that keep their names are kept.
type RolloutSequenceSpec struct {
	Stages []SequenceStage `json:"stages"`
}

// SequenceStage is one stage: the clusters it names and those whose
// labels carry every pair of Selector, and the soak after it.
type SequenceStage struct {
	Name     string            `json:"name"`
	Clusters []string          `json:"clusters,omitempty"`
	Selector map[string]string `json:"selector,omitempty"`
	// Soak is waited after the last cluster of the stage reached a
	// version before the next stage may start it: whole seconds with an
	// "s" suffix ("259200s"), or any Go duration of whole seconds
	// ("72h"). Absent: no soak.
	Soak string `json:"soak,omitempty"`
}

// RolloutSequence is a stored sequence and how far each version in play
// has gone through it (GET /v1/rollout-sequences/{name}).
type RolloutSequence struct {
	Name   string          `json:"name"`
	Stages []SequenceStage `json:"stages"`
	// Overrides are the operators' resumes and skips, oldest first.
	Overrides []SequenceOverride `json:"overrides,omitempty"`
	UpdatedAt time.Time          `json:"updatedAt,omitzero"`
	// Versions are the versions in play (the channel targets of its
	// clusters, the next step of any of them, a version a stage was
	// resumed or skipped for), newest first.
	Versions []SequenceVersion `json:"versions,omitempty"`
}

// SequenceOverride is an operator's resume or skip of a stage for a
// version.
type SequenceOverride struct {
	Version string `json:"version"`
	Stage   string `json:"stage"`
	// Action is SequenceResume or SequenceSkip.
	Action string    `json:"action"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// SequenceVersion is how far a version has gone through a sequence.
type SequenceVersion struct {
	Version string `json:"version"`
	// Reached is the number of stages done with the version: the index
	// of the stage it waits in (equal to the number of stages once every
	// stage is done).
	Reached int `json:"reached"`
	// Stage names that stage (empty once every stage is done).
	Stage  string             `json:"stage,omitempty"`
	Stages []SequenceStageRun `json:"stages"`
}

// SequenceStageRun is what one stage has done with a version.
type SequenceStageRun struct {
	Name string `json:"name"`
	// Clusters are the stage's registered clusters; NotReached those of
	// them that do not run the version or later yet.
	Clusters   []string `json:"clusters"`
	NotReached []string `json:"notReached,omitempty"`
	// ReachedAt is when the last of them reached it, once all have (absent
	// when all ran it before any recorded upgrade).
	ReachedAt time.Time `json:"reachedAt,omitzero"`
	// SoakEnds is when the stage's soak ends, once all have reached it.
	SoakEnds time.Time `json:"soakEnds,omitzero"`
	// Open: the version is eligible for the stage's clusters. Done: every
	// cluster runs it, the soak passed and no failure holds the next.
	Open bool `json:"open"`
	Done bool `json:"done"`
	// Held: an upgrade to the version failed in the stage (Failed names
	// the clusters) and no operator has resumed or skipped it since.
	Held    bool     `json:"held,omitempty"`
	Failed  []string `json:"failed,omitempty"`
	Skipped bool     `json:"skipped,omitempty"`
}

// Actions of SequenceOverride.
const (
	// SequenceResume: the failures of upgrades to the version in the
	// stage so far no longer hold the stages after it.
	SequenceResume = "resume"
	// SequenceSkip: the stages after it no longer wait for the stage's
	// clusters for the version.
	SequenceSkip = "skip"
)

// SequenceOverrideRequest is the body of POST
// /v1/rollout-sequences/{name}/stages/{stage}/resume (or /skip).
type SequenceOverrideRequest struct {
	// Version is the version the stage is resumed or skipped for; it
	// must be in the release catalog.
	Version string `json:"version"`
	// Reason is kept with the override and in the audit log.
	Reason string `json:"reason,omitempty"`
}

// SequenceWait says where a cluster stands in its rollout sequence for
// the version of its next step (UpgradeStatus.Sequence).
type SequenceWait struct {
	Sequence string `json:"sequence"`
	Stage    string `json:"stage"`
	Version  string `json:"version"`
	// WaitsFor is the stage it waits for (absent: the version is
	// eligible for its stage).
	WaitsFor string `json:"waitsFor,omitempty"`
	// NotReached are the clusters of WaitsFor that do not run Version
	// yet.
	NotReached []string `json:"notReached,omitempty"`
	// SoakEnds is when WaitsFor's soak ends, once all its clusters run
	// Version.
	SoakEnds time.Time `json:"soakEnds,omitzero"`
	// Held: an upgrade to Version failed on Failed in HeldStage, which an
	// operator must resume or skip.
	Held      bool     `json:"held,omitempty"`
	Failed    []string `json:"failed,omitempty"`
	HeldStage string   `json:"heldStage,omitempty"`
	// Bypassed: an end of support forces the step through the sequence.
	Bypassed bool `json:"bypassed,omitempty"`
}

// SequencePlan is the dry run of a version through a rollout sequence
// (GET /v1/rollout-sequences/{name}/plan?version=): each stage opens when
// the one before it is done and soaked; each of its clusters not at the
// version starts at its own next opportunity and takes its predicted
// duration. Concurrency limits, failures and an upgrade that outlasts its
// window are not modelled.
type SequencePlan struct {
	Sequence string              `json:"sequence"`
	Version  string              `json:"version"`
	Stages   []PlannedStage      `json:"stages"`
	Clusters []PlannedSeqCluster `json:"clusters"`
	// Finish is when the last cluster of the last stage is predicted to
	// run the version (absent when the plan stops: Stopped says why).
	Finish  time.Time `json:"finish,omitzero"`
	Stopped string    `json:"stopped,omitempty"`
}

// PlannedStage is one stage's predicted course.
type PlannedStage struct {
	Name string `json:"name"`
	// Opens is when the version becomes eligible for its clusters, Done
	// when its last cluster runs it, SoakEnds when the next stage opens.
	Opens    time.Time `json:"opens,omitzero"`
	Done     time.Time `json:"done,omitzero"`
	SoakEnds time.Time `json:"soakEnds,omitzero"`
	// Held: a failure holds the stages after it; the plan stops here.
	Held bool `json:"held,omitempty"`
}

// PlannedSeqCluster is one cluster's place in a sequence's plan.
type PlannedSeqCluster struct {
	Cluster string `json:"cluster"`
	Stage   string `json:"stage"`
	From    string `json:"from"`
	// Start and Finish are the predicted start and end of its upgrade;
	// for a cluster at the version already, when it reached it.
	Start  time.Time `json:"start,omitzero"`
	Finish time.Time `json:"finish,omitzero"`
	// Already: it runs the version already; Running: its upgrade to it
	// runs now.
	Already bool `json:"already,omitempty"`
	Running bool `json:"running,omitempty"`
	// Unplanned says why no start could be predicted.
	Unplanned string `json:"unplanned,omitempty"`
	// OutlastsWindow: its window closes before Finish; it pauses and
	// finishes later than predicted.
	OutlastsWindow bool `json:"outlastsWindow,omitempty"`
}
