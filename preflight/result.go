package preflight

import (
	"slices"
	"sort"
)

// Severity says whether a check's failure stops an upgrade.
type Severity string

// Severities.
const (
	// Blocking checks stop the upgrade when they fail.
	Blocking Severity = "blocking"
	// Warning checks are reported but never stop the upgrade.
	Warning Severity = "warning"
)

// Status is the outcome of one check.
type Status string

// Statuses.
const (
	Pass Status = "pass"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Result is the outcome of one check in a run.
type Result struct {
	// Check is the check's stable ID (e.g. "nodes-ready").
	Check    string
	Severity Severity
	Status   Status
	// Message is one human sentence saying what was found, naming nodes,
	// rules or objects.
	Message string
	// Data holds machine-readable detail, usually keyed by node name.
	Data map[string]string
	// Blocks is true when this result stops an upgrade: a failure of a
	// blocking check.
	Blocks bool
}

// Verdict is the overall outcome of a run.
type Verdict string

// Verdicts.
const (
	Passed             Verdict = "passed"
	PassedWithWarnings Verdict = "passedWithWarnings"
	Failed             Verdict = "failed"
)

// Report is a run's results and verdict, what the coordinator stores.
type Report struct {
	// Results are ordered by check ID.
	Results []Result
	Verdict Verdict
	// Failed lists the IDs of the checks that block, sorted.
	Failed []string
}

// blocks decides Result.Blocks. It fails closed: a status that is not
// pass or warn counts as a failure, and a severity that is not warning
// counts as blocking, so a malformed result can never let an upgrade through.
func blocks(r Result) bool {
	return r.Status != Pass && r.Status != Warn && r.Severity != Warning
}

// Aggregate orders results by check ID (stable for equal IDs), recomputes
// each Blocks and decides the verdict: failed when any result blocks,
// passedWithWarnings when any result is not a pass, passed otherwise. It
// does not modify its argument.
func Aggregate(results []Result) Report {
	out := slices.Clone(results)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Check < out[j].Check })
	rep := Report{Results: out, Verdict: Passed}
	if rep.Results == nil {
		rep.Results = []Result{}
	}
	for i := range out {
		out[i].Blocks = blocks(out[i])
		switch {
		case out[i].Blocks:
			rep.Verdict = Failed
			rep.Failed = append(rep.Failed, out[i].Check)
		case out[i].Status != Pass && rep.Verdict == Passed:
			rep.Verdict = PassedWithWarnings
		}
	}
	return rep
}

// Blocked reports whether the report stops an upgrade.
func (r Report) Blocked() bool { return r.Verdict == Failed }

// Result returns the result of the check with that ID.
func (r Report) Result(id string) (Result, bool) {
	for _, res := range r.Results {
		if res.Check == id {
			return res, true
		}
	}
	return Result{}, false
}
