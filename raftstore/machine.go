package raftstore

import "github.com/moltproject/molt/raftstore/command"

// ApplyFunc applies one decoded command body at a log index; it must be
// deterministic (see command.ApplyFunc).
type ApplyFunc = command.ApplyFunc

// Machine is the domain state machine that the Store replicates.
//
// The Store calls Handlers once at Open and Snapshot/Restore from Raft's FSM
// goroutine, never at the same time as an ApplyFunc. Reads from other
// goroutines (HTTP handlers) are the Machine's own business to synchronise.
type Machine interface {
	// Handlers is the registry: command type → apply function. Read once at
	// Open; every key must be >= FirstDomainType (ignoring IgnoreUnknown).
	Handlers() map[CommandType]ApplyFunc
	// Snapshot returns a consistent copy of the whole state. It runs on the
	// apply path, so it must be quick: copy, do not compress or upload.
	Snapshot() ([]byte, error)
	// Restore builds fresh state from data returned by Snapshot and swaps it
	// in, replacing everything.
	Restore(data []byte) error
}
