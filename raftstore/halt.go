package raftstore

import (
	"context"
	"fmt"

	"github.com/moltproject/molt/raftstore/command"
)

// HaltInfo says where and why a replica stopped applying its log: it met
// an entry (or a snapshot) written by a newer molt release, in a form
// this release cannot read. Going on would make its state differ from
// its peers' (an entry refused here is applied there), and panicking
// would take the member down in a loop; so it applies nothing after that
// entry, takes no snapshot (the log from the last one stays on disk),
// serves no reads or writes, and waits for its binary to be replaced.
// Restarted with a release that reads the entry, it restores its last
// snapshot and replays the log from there (see DESIGN.md, Members that
// cannot read an entry).
type HaltInfo struct {
	// Index is the log index of the entry it could not apply; for a
	// snapshot, the index the snapshot holds (0 when even its header
	// could not be read).
	Index uint64 `json:"index"`
	// Type is the entry's command number; 0 for a snapshot.
	Type CommandType `json:"type,omitempty"`
	// Snapshot is true when what it could not read is a snapshot.
	Snapshot bool `json:"snapshot,omitempty"`
	// NeedsVersion is the lowest molt release that reads the entry, from
	// the entry's extensions; "" when the entry names none (releases
	// before 0.2.0 wrote none, and snapshots carry none).
	NeedsVersion string `json:"needsVersion,omitempty"`
	// Detail is what this release could not read.
	Detail string `json:"detail"`
}

// Needs is the short form an operator sees in the member list:
// "needs molt ≥ 0.2.0", or "needs a newer molt (command 48)" when the
// entry names no version.
func (h HaltInfo) Needs() string {
	if h.NeedsVersion != "" {
		return "needs molt ≥ " + h.NeedsVersion
	}
	if h.Snapshot {
		return "needs a newer molt (snapshot)"
	}
	return fmt.Sprintf("needs a newer molt (command %s)", h.Type)
}

// String is the whole reason, for logs and the readiness endpoint.
func (h HaltInfo) String() string {
	what := fmt.Sprintf("entry %d (command %s)", h.Index, h.Type)
	if h.Snapshot {
		what = fmt.Sprintf("snapshot at index %d", h.Index)
	}
	return fmt.Sprintf("%s: stopped applying at %s: %s; replace this member's binary and restart it", h.Needs(), what, h.Detail)
}

// Halted reports whether this replica stopped applying its log, and
// where and why. A halted member keeps taking part in Raft (it stores
// and acknowledges entries and votes), so the others keep their quorum,
// but it applies nothing, refuses to lead (it hands leadership over),
// and Apply, Barrier and ReadIndex return ErrHalted.
func (s *Store) Halted() (HaltInfo, bool) {
	h := s.fsm.halt.Load()
	if h == nil {
		return HaltInfo{}, false
	}
	return *h, true
}

// VersionedMachine is a Machine that names, for each command it
// proposes, the lowest molt release that can read it (a table of command
// numbers and the release that introduced each, raised for a value that
// uses a field added later). Store.Apply writes that version into the
// entry's extensions, so an older member that meets the entry says which
// release it needs. A Machine without it writes no version.
type VersionedMachine interface {
	Machine
	MinVersion(c Command) string
}

// minVersion is the lowest release that reads c, for its entry's
// extensions.
func (s *Store) minVersion(c Command) string {
	if c.Type().Internal() {
		return internalSince
	}
	if vm, ok := s.fsm.machine.(VersionedMachine); ok {
		return vm.MinVersion(c)
	}
	return ""
}

// internalSince is the release that introduced raftstore's own commands
// (set-member, remove-member): the baseline.
const internalSince = command.BaselineVersion

// handOffIfHalted hands leadership over whenever this member leads while
// halted: when it halts as leader, and when it is elected afterwards (its
// log may be the most complete even though it cannot apply it). A leader
// that cannot apply its log could not confirm a read or plan from its
// state; a peer that reads the log can.
func (s *Store) handOffIfHalted(ctx context.Context) {
	if _, halted := s.Halted(); !halted || !s.IsLeader() || s.numPeers() == 0 {
		return
	}
	s.log.Warn("halted member is leader; handing leadership over")
	f := s.raft.LeadershipTransfer()
	if err := s.wait(ctx, f); err != nil {
		s.log.Warn("halted member could not hand leadership over", "err", err)
	}
}

// SetSnapshotFormat sets the newest snapshot format every member reads,
// as the caller learnt it from the members (the coordinator asks them):
// snapshots are written in it, or in this release's newest if that is
// older. 0 (the default: unknown) writes format 1, which every release
// reads.
func (s *Store) SetSnapshotFormat(readable int) {
	s.fsm.snapshotFormat.Store(int32(readable))
}

// SnapshotFormatWritten is the format the next snapshot is written in.
func (s *Store) SnapshotFormatWritten() int {
	return int(writeFormat(int(s.fsm.snapshotFormat.Load())))
}

// NewestInternalCommand is the newest of raftstore's own command numbers
// this release registers (its registry, fsm.go).
func NewestInternalCommand() CommandType {
	var newest CommandType
	for t := range (&fsm{}).internalHandlers() {
		newest = max(newest, t)
	}
	return newest
}

// Gate decides, before a command is written, whether every member can
// read it: a non-nil error refuses the command, and nothing is written
// (the capability gate: docs/mixed-versions.md). minVersion is the
// lowest release that reads the command (VersionedMachine).
type Gate func(c Command, minVersion string) error

// SetGate sets the gate every proposal passes, raftstore's own commands
// included; nil removes it.
func (s *Store) SetGate(g Gate) {
	if g == nil {
		s.gate.Store(nil)
		return
	}
	s.gate.Store(&g)
}
