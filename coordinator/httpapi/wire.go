package httpapi

import (
	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/conv"
)

// The handlers answer with the API's wire types only. Engine values
// (upgrades, plans, cluster specs) convert through package api/convert,
// where every such pair of types has its conversions and their tests; a
// stored preflight run, the coordinator's own record, is rendered here.

// preflightRunToAPI renders a stored preflight run. The run is the copy
// the coordinator's query returned: its operation lists are shared, not
// copied, as the query shares them (they are only encoded).
func preflightRunToAPI(run coordinator.PreflightRun) api.PreflightRun {
	return api.PreflightRun{
		ID: run.ID, Cluster: run.Cluster, Target: run.Target.String(), State: run.State,
		CreatedAt: run.CreatedAt, Deadline: run.Deadline, FinishedAt: run.FinishedAt,
		Operations: run.Operations, Results: run.Results,
		Report: conv.Ptr(run.Report, convert.PreflightReportToAPI),
	}
}

// preflightSummaryToAPI renders a stored run without its operations.
func preflightSummaryToAPI(s coordinator.PreflightSummary) api.PreflightRunSummary {
	run := s.Run
	out := api.PreflightRunSummary{ID: run.ID, Cluster: run.Cluster, Target: run.Target.String(), State: run.State,
		CreatedAt: run.CreatedAt, Deadline: run.Deadline, FinishedAt: run.FinishedAt, Hosts: s.Hosts}
	if run.Report != nil {
		out.Verdict, out.Failed = string(run.Report.Verdict), run.Report.Failed
	}
	return out
}
