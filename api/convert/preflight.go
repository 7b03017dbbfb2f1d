package convert

import (
	"slices"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/preflight"
)

// PreflightReportToAPI renders a preflight run's report for the wire.
func PreflightReportToAPI(r preflight.Report) api.PreflightReport {
	return api.PreflightReport{Results: conv.Slice(r.Results, preflightResultToAPI), Verdict: string(r.Verdict), Failed: slices.Clone(r.Failed)}
}

// PreflightReportFromAPI reads a preflight run's report from the wire.
func PreflightReportFromAPI(r api.PreflightReport) preflight.Report {
	return preflight.Report{Results: conv.Slice(r.Results, preflightResultFromAPI), Verdict: preflight.Verdict(r.Verdict), Failed: slices.Clone(r.Failed)}
}

func preflightResultToAPI(r preflight.Result) api.PreflightResult {
	return api.PreflightResult{Check: r.Check, Severity: string(r.Severity), Status: string(r.Status), Message: r.Message,
		Data: conv.Map(r.Data, conv.Same[string]), Blocks: r.Blocks}
}

func preflightResultFromAPI(r api.PreflightResult) preflight.Result {
	return preflight.Result{Check: r.Check, Severity: preflight.Severity(r.Severity), Status: preflight.Status(r.Status), Message: r.Message,
		Data: conv.Map(r.Data, conv.Same[string]), Blocks: r.Blocks}
}
