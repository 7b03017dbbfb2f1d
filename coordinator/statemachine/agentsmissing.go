package statemachine

import (
	"encoding/json"
	"time"

	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/raftstore/command"
)

// SinceAgentsMissing is the release that introduced CmdAgentsMissing.
const SinceAgentsMissing = "0.2.0"

// MaxAgentsMissingBatch bounds the agents of one AgentsMissingCmd, so
// that its entry stays far below a megabyte (about 60 bytes an agent).
const MaxAgentsMissingBatch = 2000

// AgentRef names one node's agent.
type AgentRef struct {
	Cluster string
	Node    string
}

// AgentsMissingCmd (CmdAgentsMissing) records that the agents named
// stopped beating, as one AgentHealthCmd with Missing set would for each:
// the liveness sweep's entry, one for every agent found gone in a tick
// rather than one each (after a leader change every agent the new leader
// has not heard from yet is due at once). An agent the state no longer
// holds (its cluster deleted since) is passed over, not an error.
type AgentsMissingCmd struct {
	Agents []AgentRef
	Now    time.Time
}

// Type is CmdAgentsMissing.
func (AgentsMissingCmd) Type() command.Type { return CmdAgentsMissing }

// agentsMissing returns how many records it changed.
func (s *state) agentsMissing(c AgentsMissingCmd) (any, error) {
	n := 0
	for _, ref := range c.Agents {
		r, ok := s.Clusters[ref.Cluster]
		if !ok {
			continue
		}
		a := r.Agents[ref.Node]
		if a == nil || a.Missing {
			continue
		}
		a.Missing, a.Healthy, a.ChangedAt = true, false, c.Now
		n++
	}
	return n, nil
}

type agentRefV1 struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
}

type agentsMissingCmdV1 struct {
	Agents []agentRefV1 `json:"agents"`
	Now    time.Time    `json:"now"`
}

func agentRefToV1(a AgentRef) agentRefV1   { return agentRefV1(a) }
func agentRefFromV1(a agentRefV1) AgentRef { return AgentRef(a) }

func (c AgentsMissingCmd) persistedV1() any {
	return agentsMissingCmdV1{Agents: conv.Slice(c.Agents, agentRefToV1), Now: c.Now}
}

// MarshalJSON encodes the command's persisted form.
func (c AgentsMissingCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

// UnmarshalJSON decodes the command's persisted form.
func (c *AgentsMissingCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p agentsMissingCmdV1) AgentsMissingCmd {
		return AgentsMissingCmd{Agents: conv.Slice(p.Agents, agentRefFromV1), Now: p.Now}
	})
}
