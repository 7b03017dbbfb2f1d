// Package raftstore is molt's generic Raft layer: it owns hashicorp/raft, the
// fsync'd log (raft-wal), the file snapshot store and the TCP transport, and it
// replicates typed commands to a domain state machine (a Machine) that knows
// nothing about Raft.
//
// Every log entry is one CommandType byte followed by a JSON body (see
// Encode). A body is a Command, which knows its own type, so Store.Apply
// takes the body alone; handlers decode it strictly (command.DecodeBody),
// refusing a field they do not know rather than dropping it. That framing, ApplyFunc and the errors of bad entries and
// snapshots live in the pure subpackage raftstore/command, re-exported
// here, so that a domain machine can register its handlers without
// importing Raft. The domain registers one ApplyFunc per command type; the FSM here
// decodes each entry, looks its handler up and returns the handler's value or
// refusal to the caller of Store.Apply. Types 1–15 are reserved for the store's
// own commands, which replicate each member's HTTP address so that a follower
// can forward writes to the leader (Store.Leader).
//
// A replica that meets an entry or a snapshot a newer release wrote and
// this one cannot read (an unknown command, an unknown field, anything a
// handler reports as command.ErrCannotRead, an entry whose extensions name
// a newer release) halts there instead of panicking or refusing it: it
// applies nothing more, takes no snapshot, hands leadership over and
// reports why (Store.Halted), until its binary is replaced and it replays
// its log. Every entry Store.Apply writes names, in raft.Log.Extensions,
// the lowest release that reads it.
//
// See DESIGN.md for the framing, the snapshot format and the membership
// metadata.
package raftstore
