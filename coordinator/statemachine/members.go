package statemachine

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore/command"
)

// The replicated record of what each coordinator member runs and can read
// (docs/mixed-versions.md). The leader learns it out of band (it asks each
// member) and writes it here only once every member reads this command
// (the capability gate): molt 0.1.0 has no such command.

// SinceMembers is the release that introduced CmdSetMembers.
const SinceMembers = "0.2.0"

// SetMembersCmd (CmdSetMembers) replaces the record of every member's
// capabilities: the leader writes the whole membership at once, so a
// member removed since the last record drops out of it.
type SetMembersCmd struct {
	Members map[string]api.MemberCapabilities
	Now     time.Time
}

func (SetMembersCmd) Type() command.Type { return CmdSetMembers }

func (s *state) setMembers(c SetMembersCmd) (any, error) {
	for id, m := range c.Members {
		if id == "" || m.Version == "" {
			return nil, &RuleError{Rule: "member", Detail: fmt.Sprintf("member %q: an id and a version are required", id), Err: ErrInvalid}
		}
	}
	s.Members = maps.Clone(c.Members)
	return nil, nil
}

// MemberRecords returns the replicated record of members' capabilities
// by member ID (nil before the first record).
func (f *Machine) MemberRecords() map[string]api.MemberCapabilities {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.st.Members)
}

// Persisted form (persisted.go: append-only).

type setMembersCmdV1 struct {
	Members map[string]memberCapabilitiesV1 `json:"members"`
	Now     time.Time                       `json:"now"`
}

type memberCapabilitiesV1 struct {
	Version       string `json:"version"`
	Commit        string `json:"commit,omitempty"`
	Command       int    `json:"command"`
	RaftCommand   int    `json:"raftCommand"`
	StateSnapshot int    `json:"stateSnapshot"`
	RaftSnapshot  int    `json:"raftSnapshot"`
	StepLayout    int    `json:"stepLayout"`
}

func membersToV1(m map[string]api.MemberCapabilities) map[string]memberCapabilitiesV1 {
	if m == nil {
		return nil
	}
	out := make(map[string]memberCapabilitiesV1, len(m))
	for id, c := range m {
		out[id] = memberCapabilitiesV1(c)
	}
	return out
}

func membersFromV1(m map[string]memberCapabilitiesV1) map[string]api.MemberCapabilities {
	if m == nil {
		return nil
	}
	out := make(map[string]api.MemberCapabilities, len(m))
	for id, c := range m {
		out[id] = api.MemberCapabilities(c)
	}
	return out
}

func (c SetMembersCmd) persistedV1() any {
	return setMembersCmdV1{Members: membersToV1(c.Members), Now: c.Now}
}

func (c SetMembersCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *SetMembersCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, func(_ *v1Decoder, p setMembersCmdV1) SetMembersCmd {
		return SetMembersCmd{Members: membersFromV1(p.Members), Now: p.Now}
	})
}

// What a member must read to apply an entry.

// Requirement is what a member must be able to read to apply a command's
// entry: the release that introduced its number (or a field it uses),
// its command number, and the step layout it carries (0: none).
type Requirement struct {
	Version    string
	Command    command.Type
	StepLayout int
}

// RequirementOf returns what c's entry needs of every member. A command
// inside an AuditedCmd is what counts: the envelope is 0.1.0's.
func RequirementOf(c Command) Requirement {
	r := Requirement{Version: MinVersion(c), Command: c.Type()}
	switch c := c.(type) {
	case AuditedCmd:
		r.Command = c.CommandType
	case StartUpgradeCmd:
		r.StepLayout = c.Options.StepLayout
	case AutoStartCmd:
		r.StepLayout = c.Options.StepLayout
	}
	return r
}

// NewestCommand is the newest command number this release registers
// (the registry, fsm.go).
func NewestCommand() command.Type {
	return slices.Max(slices.Collect(maps.Keys(decoders())))
}

// SnapshotFormat is the newest coordinator snapshot format this release
// reads and writes.
const SnapshotFormat = snapshotVersion

// NewestStepLayout is the newest upgrade step layout this release knows.
const NewestStepLayout = phases.CurrentStepLayout
