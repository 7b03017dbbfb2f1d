package api

import "time"

// PreflightRequest starts a preflight run for an upgrade to Version (POST
// /v1/clusters/{name}/preflight).
type PreflightRequest struct {
	Version string `json:"version"`
}

// Preflight run states.
const (
	PreflightRunning = "running"
	PreflightDone    = "done"
)

// PreflightRun is a stored preflight run as the coordinator returns it
// (see docs/preflight.md).
type PreflightRun struct {
	ID      string `json:"id"`
	Cluster string `json:"cluster"`
	// Target is the version the run checks an upgrade to.
	Target string `json:"target"`
	// State is PreflightRunning until every host answered or Deadline
	// passed, then PreflightDone with Report set.
	State      string    `json:"state"`
	CreatedAt  time.Time `json:"createdAt"`
	Deadline   time.Time `json:"deadline"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	// Operations are the host checks sent to each node's agent, by node;
	// Results their answers, by operation ID.
	Operations map[string][]Operation     `json:"operations"`
	Results    map[string]OperationResult `json:"results,omitempty"`
	Report     *PreflightReport           `json:"report,omitempty"`
}

// PreflightReport is a finished run's results and verdict.
type PreflightReport struct {
	// Results are ordered by check ID.
	Results []PreflightResult `json:"results"`
	// Verdict is "passed", "passedWithWarnings" or "failed".
	Verdict string `json:"verdict"`
	// Failed lists the IDs of the checks that block, sorted.
	Failed []string `json:"failed,omitempty"`
}

// PreflightResult is the outcome of one check.
type PreflightResult struct {
	// Check is the check's stable ID, e.g. "nodes-ready".
	Check string `json:"check"`
	// Severity is "blocking" or "warning".
	Severity string `json:"severity"`
	// Status is "pass", "warn" or "fail".
	Status  string `json:"status"`
	Message string `json:"message"`
	// Data holds machine-readable detail, usually keyed by node name.
	Data map[string]string `json:"data,omitempty"`
	// Blocks is true when this result stops an upgrade.
	Blocks bool `json:"blocks"`
}
