package statemachine

import (
	"encoding/json"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore/command"
)

// Agents that update themselves: the molt step of an upgrade
// (phases.StepLayoutMolt) and what it adds to the log.

// SinceAgentUpdate is the release that introduced the molt step: the
// release's molt-agent artifact (api.Release.Agent), the upgrade's agent
// options and hosts, the molt step's actions and CmdAgentResult.
const SinceAgentUpdate = "0.2.0"

// AgentResultCmd (CmdAgentResult) commits the end of a host's agent
// replacement in the molt step, pinned to its attempt.
type AgentResultCmd struct {
	Cluster string
	Result  phases.AgentResult
	Now     time.Time
}

// Type is CmdAgentResult.
func (AgentResultCmd) Type() command.Type { return CmdAgentResult }

// agentResult returns a copy of the host's task after the result.
func (s *state) agentResult(c AgentResultCmd) (any, error) {
	_, u, err := s.upgrade(c.Cluster, c.Result.Upgrade)
	if err != nil {
		return nil, err
	}
	if err := u.ApplyAgentResult(c.Result, c.Now); err != nil {
		return nil, err
	}
	a, _ := u.Agent(c.Result.Node)
	return *a, nil
}

// agentFieldsSince is the release that introduced the newest field c uses
// ("" when c uses only its number's fields): entries a release before it
// would decode without the field, silently, are written only once every
// member reads it (the capability gate).
func agentFieldsSince(c command.Command) string {
	switch c := c.(type) {
	case PutReleaseCmd:
		if c.Release.Agent != nil {
			return SinceAgentUpdate
		}
	case StartUpgradeCmd:
		if usesAgentOptions(c.Options) {
			return SinceAgentUpdate
		}
	case AutoStartCmd:
		if usesAgentOptions(c.Options) {
			return SinceAgentUpdate
		}
	case AdvanceCmd:
		for _, a := range c.Actions {
			switch a.Kind {
			case phases.ActStartAgent, phases.ActFailAgent:
				return SinceAgentUpdate
			}
			if a.Step == phases.StepIDMolt {
				return SinceAgentUpdate
			}
		}
	}
	return ""
}

func usesAgentOptions(o phases.Options) bool {
	return o.AgentVersion != "" || o.AgentTimeout != 0 || len(o.AgentVersions) > 0
}

// Persisted forms (see persisted.go: append-only).

type agentResultCmdV1 struct {
	Cluster string        `json:"cluster"`
	Result  agentResultV1 `json:"result"`
	Now     time.Time     `json:"now"`
}

type agentResultV1 struct {
	Upgrade string `json:"upgrade"`
	Node    string `json:"node"`
	Attempt int    `json:"attempt"`
	OK      bool   `json:"ok"`
	Message string `json:"message,omitempty"`
	Version string `json:"version,omitempty"`
}

// agentTaskV1 is a host of an upgrade's molt step.
type agentTaskV1 struct {
	Node       string    `json:"node"`
	Pool       string    `json:"pool"`
	From       string    `json:"from,omitempty"`
	State      string    `json:"state"`
	Attempt    int       `json:"attempt,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	Version    string    `json:"version,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// agentArtifactV1 is a release's molt-agent.
type agentArtifactV1 struct {
	Version string `json:"version"`
	URL     string `json:"url"`
	SHA256  string `json:"sha256"`
}

func (c AgentResultCmd) persistedV1() any { return agentResultCmdToV1(c) }

// MarshalJSON encodes the command's persisted form.
func (c AgentResultCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

// UnmarshalJSON decodes the command's persisted form.
func (c *AgentResultCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p agentResultCmdV1) AgentResultCmd {
		r := p.Result
		return AgentResultCmd{Cluster: p.Cluster, Now: p.Now, Result: phases.AgentResult{Upgrade: r.Upgrade, Node: r.Node,
			Attempt: r.Attempt, OK: r.OK, Message: r.Message, Version: r.Version}}
	})
}

func agentResultCmdToV1(c AgentResultCmd) agentResultCmdV1 {
	r := c.Result
	return agentResultCmdV1{Cluster: c.Cluster, Now: c.Now, Result: agentResultV1{Upgrade: r.Upgrade, Node: r.Node,
		Attempt: r.Attempt, OK: r.OK, Message: r.Message, Version: r.Version}}
}

func agentTaskToV1(a phases.AgentTask) agentTaskV1 {
	return agentTaskV1{Node: a.Node, Pool: a.Pool, From: a.From, State: string(a.State), Attempt: a.Attempt,
		StartedAt: a.StartedAt, FinishedAt: a.FinishedAt, Version: a.Version, Error: a.Error}
}

func agentTaskFromV1(a agentTaskV1) phases.AgentTask {
	return phases.AgentTask{Node: a.Node, Pool: a.Pool, From: a.From, State: phases.State(a.State), Attempt: a.Attempt,
		StartedAt: a.StartedAt, FinishedAt: a.FinishedAt, Version: a.Version, Error: a.Error}
}

func agentArtifactToV1(a api.AgentArtifact) agentArtifactV1 {
	return agentArtifactV1{Version: a.Version, URL: a.URL, SHA256: a.SHA256}
}

func agentArtifactFromV1(a agentArtifactV1) api.AgentArtifact {
	return api.AgentArtifact{Version: a.Version, URL: a.URL, SHA256: a.SHA256}
}
