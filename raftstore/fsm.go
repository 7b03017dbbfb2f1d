package raftstore

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/moltproject/molt/raftstore/command"
)

// applyResult is what the FSM returns to Raft for each command; Raft hands it
// to the ApplyFuture on the leader, where Store.Apply unpacks it.
type applyResult struct {
	Value any
	Err   error
}

// fsm is the raft.FSM: a thin dispatcher over the registry. It owns only the
// member metadata; all domain state lives in the Machine.
type fsm struct {
	machine  Machine
	handlers map[CommandType]ApplyFunc // domain handlers plus internal ones
	log      *slog.Logger
	hold     func(index uint64) // Config.HoldApply, or nil
	// version is this binary's molt release (Config.Version): an entry
	// whose extensions name a newer one halts the replica.
	version string
	// halt is set when the replica met what it cannot read (HaltInfo);
	// from then on it applies nothing. A snapshot restored in full clears
	// it. onHalt, when set, is called once it is set.
	halt   atomic.Pointer[HaltInfo]
	onHalt func()
	// snapshotFormat is the newest snapshot format every member reads
	// (Store.SetSnapshotFormat); 0, unknown, writes format 1.
	snapshotFormat atomic.Int32

	// applied is the index of the last command entry the FSM applied (or the
	// index recorded in the last restored snapshot). Raft's no-op and
	// configuration entries do not move it.
	applied atomic.Uint64

	// calls numbers the calls Raft's FSM goroutine makes (Apply,
	// Snapshot, Restore); inCall is the number of the call in progress,
	// 0 between calls. A watchdog that sees the same number twice, far
	// enough apart, has found an apply loop that stopped (Store.FSMCall);
	// an FSM with nothing to apply is between calls.
	calls, inCall atomic.Uint64
	// hook, when set, is called at the start of every Apply
	// (Config.ApplyHook).
	hook func()

	mu      sync.RWMutex
	members map[string]memberMeta // node ID → addresses, replicated
}

// newFSM checks the Machine's registry and builds the FSM.
func newFSM(m Machine, log *slog.Logger) (*fsm, error) {
	if m == nil {
		return nil, fmt.Errorf("raftstore: nil Machine")
	}
	f := &fsm{
		machine:  m,
		handlers: map[CommandType]ApplyFunc{},
		log:      log,
		members:  map[string]memberMeta{},
	}
	for t, h := range m.Handlers() {
		if t.Internal() {
			return nil, fmt.Errorf("raftstore: command type %s is reserved (domain types start at %d)", t, FirstDomainType)
		}
		if h == nil {
			return nil, fmt.Errorf("raftstore: nil ApplyFunc for command type %s", t)
		}
		f.handlers[t] = h
	}
	for t, h := range f.internalHandlers() {
		f.handlers[t] = h
	}
	return f, nil
}

// internalHandlers is the registry of raftstore's own commands.
func (f *fsm) internalHandlers() map[CommandType]ApplyFunc {
	return map[CommandType]ApplyFunc{
		cmdSetMember:    f.applySetMember,
		cmdRemoveMember: f.applyRemoveMember,
	}
}

// Apply decodes one entry and runs its handler. It panics only when the
// entry is corrupt: undecodable bytes (an empty entry, type 0), or an
// internal body that does not parse. What a newer release wrote and this
// one cannot read — a type without IgnoreUnknown it does not know, a
// field it does not declare (ErrUnknownField), anything a handler says it
// cannot read (ErrCannotRead), an entry whose extensions name a newer
// release — halts the replica at that entry (halt): nothing is applied
// from it on, so the replica never differs from its peers, and its
// upgraded binary replays the log from its last snapshot. A domain
// refusal is an applied entry like any other.
func (f *fsm) Apply(l *raft.Log) any {
	defer f.leave(f.enter())
	if f.hook != nil {
		f.hook()
	}
	if f.hold != nil {
		f.hold(l.Index)
	}
	if h := f.halt.Load(); h != nil {
		return applyResult{Err: fmt.Errorf("%w: %s", ErrHalted, h)}
	}
	t, body, err := Decode(l.Data)
	if err != nil {
		panic(fmt.Sprintf("raftstore: log entry %d undecodable, replicas diverged: %v", l.Index, err))
	}
	need := command.DecodeExtensions(l.Extensions)
	if below, ok := command.VersionBelow(f.version, need); ok && below {
		return f.stop(HaltInfo{Index: l.Index, Type: t, NeedsVersion: need,
			Detail: fmt.Sprintf("the entry needs molt %s and this member runs %s", need, f.version)})
	}
	h, ok := f.handlers[t]
	if !ok {
		if t&IgnoreUnknown == 0 {
			return f.stop(HaltInfo{Index: l.Index, Type: t, NeedsVersion: need,
				Detail: fmt.Sprintf("command %s is unknown to this release", t)})
		}
		f.log.Warn("skipping unknown command type flagged IgnoreUnknown", "index", l.Index, "type", t.String())
		f.applied.Store(l.Index)
		return nil
	}
	v, err := h(l.Index, body)
	if command.CannotRead(err) {
		// Every member of this release stops here, not only the leader
		// that proposed it: refusing it instead would leave this replica
		// behind the members that applied it.
		return f.stop(HaltInfo{Index: l.Index, Type: t, NeedsVersion: need, Detail: err.Error()})
	}
	f.applied.Store(l.Index)
	return applyResult{Value: v, Err: err}
}

// stop halts the replica (see HaltInfo), logs why once, and returns the
// response of the entry it stopped at.
func (f *fsm) stop(h HaltInfo) any {
	f.halt.Store(&h)
	f.log.Error("this member cannot read its log and stopped applying it; it applies nothing more until its binary is replaced",
		"index", h.Index, "type", h.Type.String(), "snapshot", h.Snapshot, "needs", h.Needs(), "detail", h.Detail,
		"applied", f.applied.Load(), "version", f.version)
	if f.onHalt != nil {
		f.onHalt()
	}
	return applyResult{Err: fmt.Errorf("%w: %s", ErrHalted, h)}
}

// Snapshot takes the point-in-time copy. Raft calls it on the FSM goroutine,
// between two Apply calls, so Machine.Snapshot sees a consistent state.
//
// A halted replica takes none: its state stops at the entry it could not
// read, while Raft counts every later entry as handed to it, so a
// snapshot would be labelled with an index its state does not reach and
// the log it compacted away would be lost to the upgraded binary.
// hashicorp/raft logs the error and keeps the log as it is.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	defer f.leave(f.enter())
	if h := f.halt.Load(); h != nil {
		return nil, fmt.Errorf("%w: no snapshot is taken, the log is kept for the upgraded binary: %s", ErrHalted, h)
	}
	data, err := f.machine.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("raftstore: machine snapshot: %w", err)
	}
	f.mu.RLock()
	members := maps.Clone(f.members)
	f.mu.RUnlock()
	return &fsmSnapshot{data: snapshotData{index: f.applied.Load(), members: members, machine: data, format: writeFormat(int(f.snapshotFormat.Load()))}}, nil
}

// Restore replaces all state with a snapshot's. Everything is parsed before
// anything is swapped, so a bad snapshot leaves the old state in place.
//
// A snapshot this release cannot read (a newer format, a field it does not
// know, anything the Machine says it cannot read) halts the replica
// instead of failing: at start, hashicorp/raft would otherwise refuse to
// open, or fall back to an older snapshot whose log may be compacted; and
// sent by the leader, it would be sent again for ever. Halted, the member
// keeps the snapshot on disk for its upgraded binary. A snapshot restored
// in full replaces everything, the entry a halt stopped at included, so
// it ends a halt.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer f.leave(f.enter())
	defer rc.Close()
	s, err := readSnapshot(rc)
	if err != nil {
		if command.CannotRead(err) {
			f.stop(HaltInfo{Index: s.index, Snapshot: true, Detail: err.Error()})
			return nil
		}
		return err
	}
	if err := f.machine.Restore(s.machine); err != nil {
		if command.CannotRead(err) {
			f.stop(HaltInfo{Index: s.index, Snapshot: true, Detail: err.Error()})
			return nil
		}
		return fmt.Errorf("raftstore: machine restore: %w", err)
	}
	f.mu.Lock()
	f.members = s.members
	f.mu.Unlock()
	f.applied.Store(s.index)
	if h := f.halt.Swap(nil); h != nil {
		f.log.Info("a snapshot this release reads replaced the state this member had halted at; applying again", "index", s.index, "was", h.String())
	}
	return nil
}

// enter marks a call of Raft's FSM goroutine in progress and returns its
// number.
func (f *fsm) enter() uint64 {
	n := f.calls.Add(1)
	f.inCall.Store(n)
	return n
}

// leave marks call n finished.
func (f *fsm) leave(n uint64) { f.inCall.CompareAndSwap(n, 0) }

var _ raft.FSM = (*fsm)(nil)
