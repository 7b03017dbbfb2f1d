package api

import "time"

// Plan is a dry run's answer (POST /v1/clusters/{name}/upgrade with
// dryRun): the steps in order, the batches of nodes, a predicted timeline,
// and the disruption each step is expected to cause (SPEC §4).
type Plan struct {
	Cluster string        `json:"cluster"`
	From    string        `json:"from"`
	To      string        `json:"to"`
	Start   time.Time     `json:"start"`
	End     time.Time     `json:"end"`
	Steps   []PlannedStep `json:"steps"`
	// Total is the predicted duration with the configured settings, in
	// nanoseconds on the wire.
	Total time.Duration `json:"total"`
	// CriticalPath is a lower bound: the longest dependency chain at the
	// most parallelism the rules allow.
	CriticalPath time.Duration `json:"criticalPath"`
	// Waits are the stretches an automatic upgrade is predicted to spend
	// waiting for its maintenance window or the end of an exclusion, in
	// wall-clock time; End and Total include them.
	Waits []PlannedWait `json:"waits,omitempty"`
	// WindowNeverOpens: for some step the window never opens again; the
	// timeline after it is not predicted.
	WindowNeverOpens bool `json:"windowNeverOpens,omitempty"`
}

// PlannedWait is a stretch of the plan spent waiting before a step (or a
// batch of its nodes) may start.
type PlannedWait struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Step  string    `json:"step"`
	// Target is controlPlane or nodes: what the step changes.
	Target string `json:"target"`
}

// PlannedStep is a step of the plan with its predicted timeline.
type PlannedStep struct {
	ID         string    `json:"id"`
	Kind       StepKind  `json:"kind"`
	Pool       string    `json:"pool,omitempty"`
	Role       Role      `json:"role,omitempty"`
	Deps       []string  `json:"deps,omitempty"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	Batches    []Batch   `json:"batches,omitempty"`
	Disruption string    `json:"disruption"`
	// Strategy of a MIG pool ("surge" or "blueGreen"); SizeRange the
	// pool's size at least and at most while it upgrades.
	Strategy  string     `json:"strategy,omitempty"`
	SizeRange *SizeRange `json:"sizeRange,omitempty"`
	// Phases are a blue/green pool's phases with their timeline; Soak what
	// it soaks.
	Phases []PlannedPhase `json:"phases,omitempty"`
	Soak   *PlannedSoak   `json:"soak,omitempty"`
}

// SizeRange is a MIG pool's size range while it upgrades.
type SizeRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// PlannedPhase is a blue/green phase with its predicted timeline.
type PlannedPhase struct {
	Phase string    `json:"phase"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// PlannedSoak is a blue/green pool's soak: after each batch, as a pool,
// and in all (nanoseconds on the wire, as Total); Capped: the total
// reached 7 days, when blue is deleted at once.
type PlannedSoak struct {
	Batch  time.Duration `json:"batch"`
	Pool   time.Duration `json:"pool"`
	Total  time.Duration `json:"total"`
	Capped bool          `json:"capped,omitempty"`
}

// Batch is a set of nodes predicted to upgrade together.
type Batch struct {
	Index int       `json:"index"`
	Nodes []string  `json:"nodes"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}
