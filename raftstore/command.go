package raftstore

import (
	"encoding/json"
	"fmt"
)

// CommandType is the first byte of every Raft log entry and selects the
// ApplyFunc that applies it. Types are append-only: a number, once released,
// is never renumbered nor reused, because old log entries and snapshots on
// disk still carry it.
type CommandType uint8

const (
	// IgnoreUnknown is a flag bit, part of a type's number. A replica that
	// meets an unregistered type with this bit set skips the entry; without
	// it, the replica panics, because applying a log it does not understand
	// would silently diverge from its peers. Define a command that older
	// versions may safely skip as, e.g., `CmdNote = 20 | IgnoreUnknown`.
	IgnoreUnknown CommandType = 0x80

	// FirstDomainType is the lowest type a Machine may register. Types 1–15
	// (with or without IgnoreUnknown) belong to raftstore itself; 0 is never
	// a valid type so that a zeroed entry cannot be mistaken for a command.
	FirstDomainType CommandType = 16
)

// Internal command types (1–15). Append-only, like domain types.
const (
	// cmdSetMember records (or updates) one member's addresses.
	cmdSetMember CommandType = 1
	// cmdRemoveMember forgets one member's addresses.
	cmdRemoveMember CommandType = 2
)

// base is the type number without the IgnoreUnknown flag.
func (t CommandType) base() CommandType { return t &^ IgnoreUnknown }

// isInternal reports whether t lies in raftstore's reserved range.
func (t CommandType) isInternal() bool { return t.base() < FirstDomainType }

// String prints the number and the flag, for logs.
func (t CommandType) String() string {
	if t&IgnoreUnknown != 0 {
		return fmt.Sprintf("%d|ignore-unknown", uint8(t.base()))
	}
	return fmt.Sprintf("%d", uint8(t))
}

// Encode frames a command as one type byte followed by body as JSON. A body
// that is already JSON can be passed as json.RawMessage.
func Encode(t CommandType, body any) ([]byte, error) {
	if t.base() == 0 {
		return nil, fmt.Errorf("%w: type %s", ErrBadCommand, t)
	}
	js, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%w: type %s: %w", ErrBadCommand, t, err)
	}
	b := make([]byte, 0, 1+len(js))
	b = append(b, byte(t))
	return append(b, js...), nil
}

// Decode splits a framed command into its type and JSON body. The body is a
// sub-slice of b, not a copy. The JSON itself is not checked here: each
// ApplyFunc unmarshals into its own type.
func Decode(b []byte) (CommandType, []byte, error) {
	if len(b) == 0 {
		return 0, nil, fmt.Errorf("%w: empty entry", ErrBadCommand)
	}
	t := CommandType(b[0])
	if t.base() == 0 {
		return 0, nil, fmt.Errorf("%w: type %s", ErrBadCommand, t)
	}
	return t, b[1:], nil
}
