package raftstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
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
	f.handlers[cmdSetMember] = f.applySetMember
	f.handlers[cmdRemoveMember] = f.applyRemoveMember
	return f, nil
}

// Apply decodes one entry and runs its handler. It panics only when the entry
// cannot be understood at all: undecodable bytes, or a type without
// IgnoreUnknown that this binary does not know. Going on would make this
// replica's state differ from its peers' without anyone noticing. A body
// with a field its type does not declare is refused by the handler
// (ErrUnknownField) and logged here, with the index, the type and the
// field.
func (f *fsm) Apply(l *raft.Log) any {
	defer f.leave(f.enter())
	if f.hook != nil {
		f.hook()
	}
	if f.hold != nil {
		f.hold(l.Index)
	}
	t, body, err := Decode(l.Data)
	if err != nil {
		panic(fmt.Sprintf("raftstore: log entry %d undecodable, replicas diverged: %v", l.Index, err))
	}
	h, ok := f.handlers[t]
	if !ok {
		if t&IgnoreUnknown == 0 {
			panic(fmt.Sprintf("raftstore: log entry %d has unknown command type %s, replicas diverged (upgrade this binary)", l.Index, t))
		}
		f.log.Warn("skipping unknown command type flagged IgnoreUnknown", "index", l.Index, "type", t.String())
		f.applied.Store(l.Index)
		return nil
	}
	v, err := h(l.Index, body)
	f.applied.Store(l.Index)
	if errors.Is(err, ErrUnknownField) {
		// Every member reports it, not only the leader that proposed it:
		// on followers the refusal has no caller to return to. It is
		// either a newer release's entry (upgrade this member) or a
		// hand-written one.
		f.log.Error("command refused: it holds a field this release does not know", "index", l.Index, "type", t.String(), "err", err)
	}
	return applyResult{Value: v, Err: err}
}

// Snapshot takes the point-in-time copy. Raft calls it on the FSM goroutine,
// between two Apply calls, so Machine.Snapshot sees a consistent state.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	defer f.leave(f.enter())
	data, err := f.machine.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("raftstore: machine snapshot: %w", err)
	}
	f.mu.RLock()
	members := maps.Clone(f.members)
	f.mu.RUnlock()
	return &fsmSnapshot{data: snapshotData{index: f.applied.Load(), members: members, machine: data}}, nil
}

// Restore replaces all state with a snapshot's. Everything is parsed before
// anything is swapped, so a bad snapshot leaves the old state in place.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer f.leave(f.enter())
	defer rc.Close()
	s, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	if err := f.machine.Restore(s.machine); err != nil {
		return fmt.Errorf("raftstore: machine restore: %w", err)
	}
	f.mu.Lock()
	f.members = s.members
	f.mu.Unlock()
	f.applied.Store(s.index)
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
