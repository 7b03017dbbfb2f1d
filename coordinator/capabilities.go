package coordinator

import (
	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/internal/version"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/raftstore/command"
)

// What a member can read (docs/mixed-versions.md). Every member serves
// its own capabilities (GET /v1/members/self/capabilities, members only);
// the leader asks each member (memberwatch.go), records them in the
// replicated membership once every member reads that record, and writes
// nothing a member cannot read (gate.go).

// Baseline is what molt 0.1.0 reads (commit bb51d81, before members said
// what they read): a member that does not answer, or runs 0.1.0, is taken
// to read exactly this. It is history, pinned: the command numbers and
// formats 0.1.0 registered (TestBaselineIsWhat010Reads checks them
// against the release each command number names).
var Baseline = api.MemberCapabilities{
	Version:       command.BaselineVersion,
	Command:       47, // statemachine.CmdAudited
	RaftCommand:   2,  // raftstore's remove-member
	StateSnapshot: 1,
	RaftSnapshot:  1,
	StepLayout:    3, // phases.StepLayoutGates
}

// BinaryCapabilities is what this binary reads, derived from it: its
// release, the newest command numbers its registries hold, the newest
// snapshot formats and step layout it knows.
func BinaryCapabilities() api.MemberCapabilities {
	v := version.Get()
	return api.MemberCapabilities{
		Version:       v.Version,
		Commit:        v.Commit,
		Command:       int(statemachine.NewestCommand()),
		RaftCommand:   int(raftstore.NewestInternalCommand()),
		StateSnapshot: statemachine.SnapshotFormat,
		RaftSnapshot:  raftstore.SnapshotFormat,
		StepLayout:    statemachine.NewestStepLayout,
	}
}

// Capabilities is what this member reports it reads: its binary's
// (Config.Capabilities replaces it, for tests that simulate a member of
// another release).
func (c *Coordinator) Capabilities() api.MemberCapabilities {
	if c.cfg.Capabilities != nil {
		return c.cfg.Capabilities()
	}
	return BinaryCapabilities()
}

// MemberSelf is this member's answer about itself: what it reads and,
// while it cannot apply its log, why (the member route the leader asks).
func (c *Coordinator) MemberSelf() api.MemberSelf {
	s := api.MemberSelf{ID: c.cfg.Raft.NodeID, Capabilities: c.Capabilities()}
	if h, halted := c.store.Halted(); halted {
		s.Reason = h.Needs()
	}
	return s
}
