package statemachine

import (
	"slices"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/preflight"
)

// Persisted form of a preflight run and its report (see persisted.go:
// append-only).

type preflightRunV1 struct {
	ID         string                       `json:"id"`
	Cluster    string                       `json:"cluster"`
	Target     string                       `json:"target"`
	State      string                       `json:"state"`
	CreatedAt  time.Time                    `json:"createdAt"`
	Deadline   time.Time                    `json:"deadline"`
	FinishedAt time.Time                    `json:"finishedAt,omitzero"`
	Operations map[string][]operationV1     `json:"operations"`
	Results    map[string]operationResultV1 `json:"results,omitempty"`
	Report     *preflightReportV1           `json:"report,omitempty"`
	// HostPlan: 0.2.0 (PreflightRun.HostPlan); only in entries.
	HostPlan int `json:"hostPlan,omitempty"`
}

type preflightReportV1 struct {
	Results []preflightResultV1 `json:"results"`
	Verdict string              `json:"verdict"`
	Failed  []string            `json:"failed,omitempty"`
}

type preflightResultV1 struct {
	Check    string            `json:"check"`
	Severity string            `json:"severity"`
	Status   string            `json:"status"`
	Message  string            `json:"message"`
	Data     map[string]string `json:"data,omitempty"`
	Blocks   bool              `json:"blocks"`
}

func preflightRunToV1(r PreflightRun) preflightRunV1 {
	return preflightRunV1{ID: r.ID, Cluster: r.Cluster, Target: r.Target.String(), State: r.State,
		CreatedAt: r.CreatedAt, Deadline: r.Deadline, FinishedAt: r.FinishedAt,
		Operations: conv.Map(r.Operations, func(ops []api.Operation) []operationV1 { return conv.Slice(ops, operationToV1) }),
		Results:    conv.Map(r.Results, operationResultToV1),
		Report:     conv.Ptr(r.Report, preflightReportToV1), HostPlan: r.HostPlan}
}

func (d *v1Decoder) preflightRun(r preflightRunV1) PreflightRun {
	return PreflightRun{ID: r.ID, Cluster: r.Cluster, Target: d.version(r.Target), State: r.State,
		CreatedAt: r.CreatedAt, Deadline: r.Deadline, FinishedAt: r.FinishedAt,
		Operations: conv.Map(r.Operations, func(ops []operationV1) []api.Operation { return conv.Slice(ops, operationFromV1) }),
		Results:    conv.Map(r.Results, operationResultFromV1),
		Report:     conv.Ptr(r.Report, preflightReportFromV1), HostPlan: r.HostPlan}
}

func preflightReportToV1(r preflight.Report) preflightReportV1 {
	return preflightReportV1{Verdict: string(r.Verdict), Failed: slices.Clone(r.Failed),
		Results: conv.Slice(r.Results, func(x preflight.Result) preflightResultV1 {
			return preflightResultV1{Check: x.Check, Severity: string(x.Severity), Status: string(x.Status), Message: x.Message,
				Data: conv.Map(x.Data, conv.Same[string]), Blocks: x.Blocks}
		})}
}

func preflightReportFromV1(r preflightReportV1) preflight.Report {
	return preflight.Report{Verdict: preflight.Verdict(r.Verdict), Failed: slices.Clone(r.Failed),
		Results: conv.Slice(r.Results, func(x preflightResultV1) preflight.Result {
			return preflight.Result{Check: x.Check, Severity: preflight.Severity(x.Severity), Status: preflight.Status(x.Status), Message: x.Message,
				Data: conv.Map(x.Data, conv.Same[string]), Blocks: x.Blocks}
		})}
}
