package statemachine

import (
	"encoding/json"
	"time"

	"github.com/moltproject/molt/raftstore/command"
)

// At 15,000 hosts a preflight run collects 30,000 results; one entry each
// is 30,000 Raft round trips and fsyncs. The leader gathers the results
// that arrive while an entry is in flight into the next one (group
// commit, coordinator/preflight_results.go), so the number of entries
// follows the log's pace, not the agents' count.

// SincePreflightResults is the release that introduced CmdPreflightResults.
const SincePreflightResults = "0.2.0"

// PreflightResultsCmd (CmdPreflightResults) records several agents'
// results of preflight operations, each exactly as a PreflightResultCmd
// would: each item is applied or refused on its own (a result of a run
// that finished, or an operation that is not the node's, changes nothing
// and does not keep the others out). The response is a []error, one per
// item, nil for an item applied.
type PreflightResultsCmd struct {
	Results []PreflightResultCmd
	Now     time.Time
}

func (PreflightResultsCmd) Type() command.Type { return CmdPreflightResults }

func (s *state) preflightResults(c PreflightResultsCmd) (any, error) {
	errs := make([]error, len(c.Results))
	for i, r := range c.Results {
		_, errs[i] = s.preflightResult(r)
	}
	return errs, nil
}

// Persisted form (persisted.go: append-only).

type preflightResultsCmdV1 struct {
	Results []preflightResultCmdV1 `json:"results"`
	Now     time.Time              `json:"now"`
}

func (c PreflightResultsCmd) persistedV1() any {
	out := preflightResultsCmdV1{Results: make([]preflightResultCmdV1, len(c.Results)), Now: c.Now}
	for i, r := range c.Results {
		out.Results[i] = preflightResultToV1(r)
	}
	return out
}

func (c PreflightResultsCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *PreflightResultsCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(d *v1Decoder, p preflightResultsCmdV1) PreflightResultsCmd {
		out := PreflightResultsCmd{Results: make([]PreflightResultCmd, len(p.Results)), Now: p.Now}
		for i, r := range p.Results {
			out.Results[i] = preflightResultFromV1(d, r)
		}
		return out
	})
}
