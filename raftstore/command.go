package raftstore

import "github.com/moltproject/molt/raftstore/command"

// CommandType is the first byte of every Raft log entry and selects the
// ApplyFunc that applies it. Types are append-only: a number, once released,
// is never renumbered nor reused, because old log entries and snapshots on
// disk still carry it. It is command.Type: the framing lives in the pure
// package raftstore/command, which a domain state machine imports without
// importing Raft.
type CommandType = command.Type

const (
	// IgnoreUnknown is a flag bit, part of a type's number (see
	// command.IgnoreUnknown).
	IgnoreUnknown = command.IgnoreUnknown

	// FirstDomainType is the lowest type a Machine may register (see
	// command.FirstDomainType).
	FirstDomainType = command.FirstDomainType
)

// Internal command types (1–15). Append-only, like domain types.
const (
	// cmdSetMember records (or updates) one member's addresses.
	cmdSetMember CommandType = 1
	// cmdRemoveMember forgets one member's addresses.
	cmdRemoveMember CommandType = 2
)

func (setMemberBody) Type() CommandType    { return cmdSetMember }
func (removeMemberBody) Type() CommandType { return cmdRemoveMember }

// Command is a command body that knows its type number (see
// command.Command).
type Command = command.Command

// Encode frames a command as one type byte, c.Type(), followed by c as
// JSON (see command.Encode).
func Encode(c Command) ([]byte, error) { return command.Encode(c) }

// Decode splits a framed command into its type and JSON body (see
// command.Decode).
func Decode(b []byte) (CommandType, []byte, error) { return command.Decode(b) }
