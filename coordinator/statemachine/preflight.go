package statemachine

import (
	"fmt"
	"slices"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

// Preflight runs are replicated objects (SPEC §5): the leader decides the
// host operations of a run and commits them with the run, agents' results
// are committed as they come, and the leader commits the report once every
// host answered or the run's deadline passed. A new leader resumes a run
// from the log: it offers the same operation IDs and finishes it.

// maxPreflights bounds the runs kept per cluster.
const maxPreflights = 20

// PreflightRun is one stored preflight run. The API shows it as
// api.PreflightRun (coordinator/httpapi's wire.go); the log holds it as
// preflightRunV1.
type PreflightRun struct {
	ID         string
	Cluster    string
	Target     phases.Version
	State      string // running | done
	CreatedAt  time.Time
	Deadline   time.Time
	FinishedAt time.Time
	Operations map[string][]api.Operation
	Results    map[string]api.OperationResult
	Report     *preflight.Report
	// HostPlan, in an entry that starts the run, says that the entry
	// carries no Operations: every member derives them when it applies
	// the entry (preflight_plan.go). Zero in a stored run.
	HostPlan int
}

// PreflightStartCmd (CmdPreflightStart) stores a new preflight run with its host operations.
type PreflightStartCmd struct {
	Run PreflightRun
}

// PreflightResultCmd (CmdPreflightResult) records an agent's result of a preflight operation.
type PreflightResultCmd struct {
	Cluster string
	Run     string
	Node    string
	Result  api.OperationResult
}

// PreflightFinishCmd (CmdPreflightFinish) stores a run's report and starts or refuses the upgrade waiting for it.
type PreflightFinishCmd struct {
	Cluster string
	Run     string
	Report  preflight.Report
	Now     time.Time
}

func (r *ClusterRecord) preflight(id string) *PreflightRun {
	for _, p := range r.Preflights {
		if p.ID == id {
			return p
		}
	}
	return nil
}

func (s *state) preflightStart(c PreflightStartCmd) (any, error) {
	if err := checkHostPlan(c.Run.HostPlan); err != nil {
		return nil, err
	}
	r, err := s.cluster(c.Run.Cluster)
	if err != nil {
		return nil, err
	}
	if r.preflight(c.Run.ID) != nil {
		return nil, fmt.Errorf("preflight %s exists: %w", c.Run.ID, phases.ErrStale)
	}
	s.addPreflight(r, c.Run)
	return nil, nil
}

// addPreflight stores a new running preflight run, its operations derived
// when the entry names a host plan, keeping the latest maxPreflights.
func (s *state) addPreflight(r *ClusterRecord, run PreflightRun) {
	s.hostOperations(r, &run)
	run.State = "running"
	r.PreflightSeq++
	r.Preflights = append(r.Preflights, &run)
	if len(r.Preflights) > maxPreflights {
		r.Preflights = r.Preflights[len(r.Preflights)-maxPreflights:]
	}
}

// runningPreflight finds a run that still takes results.
func (s *state) runningPreflight(cluster, id string) (*PreflightRun, error) {
	r, err := s.cluster(cluster)
	if err != nil {
		return nil, err
	}
	run := r.preflight(id)
	if run == nil || run.State != "running" {
		return nil, fmt.Errorf("preflight %s is not running: %w", id, phases.ErrStale)
	}
	return run, nil
}

func (s *state) preflightResult(c PreflightResultCmd) (any, error) {
	run, err := s.runningPreflight(c.Cluster, c.Run)
	if err != nil {
		return nil, err
	}
	owned := false
	for _, op := range run.Operations[c.Node] {
		owned = owned || op.ID == c.Result.ID
	}
	if !owned {
		return nil, &RuleError{Rule: "operation-id", Detail: fmt.Sprintf("operation %s is not node %s's in preflight %s", c.Result.ID, c.Node, c.Run), Err: ErrNotFound}
	}
	if old, ok := run.Results[c.Result.ID]; ok && old.State != api.OpRunning {
		return nil, fmt.Errorf("result of %s already recorded: %w", c.Result.ID, phases.ErrStale)
	}
	if run.Results == nil {
		run.Results = map[string]api.OperationResult{}
	}
	run.Results[c.Result.ID] = c.Result
	return nil, nil
}

func (s *state) preflightFinish(c PreflightFinishCmd) (any, error) {
	run, err := s.runningPreflight(c.Cluster, c.Run)
	if err != nil {
		return nil, err
	}
	rep := c.Report
	run.Report, run.State, run.FinishedAt = &rep, "done", c.Now
	// The upgrade waiting for this run starts or is refused by the same
	// entry that stores the report: the replicated state never holds a
	// running upgrade without the passing run it names.
	r := s.Clusters[c.Cluster]
	if u := r.Upgrade; u != nil && u.State == phases.UpgradePreflight && u.Preflight == run.ID {
		u.Revision++
		if rep.Blocked() {
			u.State, u.FinishedAt, u.RefusedChecks = phases.UpgradeRefused, c.Now, slices.Clone(rep.Failed)
			r.History = append(r.History, api.UpgradeSummary{ID: u.ID, From: u.From.String(), To: u.To.String(),
				State: convert.UpgradeStateToAPI(u.State), CreatedAt: u.CreatedAt, FinishedAt: u.FinishedAt})
		} else {
			u.State = phases.UpgradeRunning
			r.Spec.Version = u.To
		}
	}
	return nil, nil
}
