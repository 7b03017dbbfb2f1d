package raftstore

import (
	"errors"

	"github.com/moltproject/molt/raftstore/command"
)

// Sentinel errors. Store methods wrap them with %w, so callers (the one
// function that maps errors to HTTP problems) test them with errors.Is.
var (
	// ErrNotLeader is returned by writes and membership changes on a member
	// that is not the leader; the caller should forward to Store.Leader.
	ErrNotLeader = errors.New("raftstore: not the leader")

	// ErrLeaderNotFound means no leader is known right now (an election is
	// running or quorum is lost).
	ErrLeaderNotFound = errors.New("raftstore: no leader known")

	// ErrLeadershipLost means the leader lost leadership after the command
	// was appended but before it was known to be committed: the command may
	// or may not have been applied. Kept apart from ErrNotLeader because a
	// blind retry is only safe for commands that carry their own stale check.
	ErrLeadershipLost = errors.New("raftstore: leadership lost while committing")

	// ErrClosed is returned by every operation after Close or Kill.
	ErrClosed = errors.New("raftstore: store closed")

	// ErrTimeout means the context or the apply timeout expired before Raft
	// answered. For writes the outcome is unknown.
	ErrTimeout = errors.New("raftstore: timed out")

	// ErrUnknownMember is returned by Remove for an ID that is neither in
	// the configuration nor in the member metadata: nothing to remove.
	ErrUnknownMember = errors.New("raftstore: no such member")

	// ErrUnknownCommand is returned by Store.Apply for a command type that the
	// Machine did not register, before anything is written to the log.
	ErrUnknownCommand = errors.New("raftstore: unknown command type")

	// ErrHalted is returned by Apply, Barrier, ReadIndex and membership
	// changes on a member that stopped applying its log because it met an
	// entry or a snapshot this release cannot read (Store.Halted), and by
	// the FSM for every entry after that one.
	ErrHalted = errors.New("raftstore: this member stopped applying its log")

	// ErrCannotRead marks an entry or snapshot written by a newer release
	// in a form this one cannot read (see command.ErrCannotRead).
	ErrCannotRead = command.ErrCannotRead

	// ErrBadCommand means bytes could not be framed or unframed as a command
	// (empty entry, type 0, body that does not marshal).
	ErrBadCommand = command.ErrBadCommand

	// ErrBadSnapshot means a snapshot could not be parsed.
	ErrBadSnapshot = command.ErrBadSnapshot

	// ErrUnknownField means a command body or snapshot holds a field this
	// release does not declare; the replica halts there (see
	// command.ErrUnknownField).
	ErrUnknownField = command.ErrUnknownField
)
