// Package command is the pure part of raftstore's log format: the type byte
// that starts every Raft log entry, how an entry is framed (Encode, Decode),
// the signature of a domain apply function, and the sentinel errors of bad
// entries and snapshots. It imports no Raft and does no I/O, so that a
// domain state machine (coordinator/statemachine) can register its apply
// functions without depending on the Raft store; package raftstore
// re-exports every name here.
package command

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Type is the first byte of every Raft log entry and selects the ApplyFunc
// that applies it. Types are append-only: a number, once released, is never
// renumbered nor reused, because old log entries and snapshots on disk still
// carry it. raftstore calls it CommandType.
type Type uint8

const (
	// IgnoreUnknown is a flag bit, part of a type's number. A replica that
	// meets an unregistered type with this bit set skips the entry; without
	// it, the replica halts there (raftstore's Store.Halted), because
	// applying a log it does not understand would silently diverge from
	// its peers. Define a command that older
	// versions may safely skip as, e.g., `CmdNote = 20 | IgnoreUnknown`.
	IgnoreUnknown Type = 0x80

	// FirstDomainType is the lowest type a Machine may register. Types 1–15
	// (with or without IgnoreUnknown) belong to raftstore itself; 0 is never
	// a valid type so that a zeroed entry cannot be mistaken for a command.
	FirstDomainType Type = 16
)

// Base is the type number without the IgnoreUnknown flag.
func (t Type) Base() Type { return t &^ IgnoreUnknown }

// Internal reports whether t lies in raftstore's reserved range.
func (t Type) Internal() bool { return t.Base() < FirstDomainType }

// String prints the number and the flag, for logs.
func (t Type) String() string {
	if t&IgnoreUnknown != 0 {
		return fmt.Sprintf("%d|ignore-unknown", uint8(t.Base()))
	}
	return fmt.Sprintf("%d", uint8(t))
}

// ApplyFunc applies one decoded command body at a log index. A domain refusal
// (stale decision, rule broken) is returned as an error value, never a panic:
// the entry is committed on every replica and every replica refuses it the
// same way, so state stays identical. The value and the error reach the
// caller of Store.Apply on the leader; on followers they are dropped.
//
// An ApplyFunc must be deterministic: no clock reads, no randomness, no I/O.
// Everything it decides on travels in the body.
type ApplyFunc func(index uint64, body []byte) (any, error)

var (
	// ErrBadCommand means bytes could not be framed or unframed as a command
	// (empty entry, type 0, body that does not marshal).
	ErrBadCommand = errors.New("raftstore: malformed command")

	// ErrBadSnapshot means a snapshot could not be parsed.
	ErrBadSnapshot = errors.New("raftstore: malformed snapshot")

	// ErrUnknownField means a command body (or a snapshot) holds a field
	// that this release's type does not declare: it was written by a
	// newer release, or by hand. DecodeBody refuses it rather than drop
	// the field, because applying the rest would give a state that
	// differs from what the writer meant. An ApplyFunc returns it,
	// changing nothing, and the Store halts the replica at the entry (see
	// ErrCannotRead): refusing it would leave this replica behind the
	// newer ones that apply it. It does not panic.
	ErrUnknownField = errors.New("raftstore: unknown field")
)

// Command is a command body that knows its type number. Encode frames a
// Command, and Store.Apply takes one, so a body cannot be proposed under
// another command's number: the pair (type, body) is one value, and a
// value that is not a command does not compile where a Command is
// expected.
//
// Type must return a constant: the number written out in the const block
// of the package that declares the command (never computed from another),
// whatever the value of the receiver, so that the zero value of a command
// type names its number too.
type Command interface {
	Type() Type
}

// Encode frames a command as one type byte, c.Type(), followed by c as
// JSON.
func Encode(c Command) ([]byte, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil command", ErrBadCommand)
	}
	t := c.Type()
	if t.Base() == 0 {
		return nil, fmt.Errorf("%w: type %s", ErrBadCommand, t)
	}
	js, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("%w: type %s: %w", ErrBadCommand, t, err)
	}
	b := make([]byte, 0, 1+len(js))
	b = append(b, byte(t))
	return append(b, js...), nil
}

// Decode splits a framed command into its type and JSON body. The body is a
// sub-slice of b, not a copy. The JSON itself is not checked here: each
// ApplyFunc decodes it into its own type, with DecodeBody.
func Decode(b []byte) (Type, []byte, error) {
	if len(b) == 0 {
		return 0, nil, fmt.Errorf("%w: empty entry", ErrBadCommand)
	}
	t := Type(b[0])
	if t.Base() == 0 {
		return 0, nil, fmt.Errorf("%w: type %s", ErrBadCommand, t)
	}
	return t, b[1:], nil
}

// DecodeBody decodes a command body (or any persisted JSON) into v
// strictly: a field v's type does not declare is an error wrapping
// ErrUnknownField and naming the field, and so is anything after the
// value. Other errors (bytes that are not JSON, a field of the wrong
// JSON type) are returned as json.Unmarshal returns them.
//
// Strictness reaches nested values that encoding/json decodes itself; a
// nested type with its own UnmarshalJSON must decode strictly too.
func DecodeBody(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		// encoding/json has no typed error for an unknown field; its
		// message has been "json: unknown field %q" since the option was
		// added.
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fmt.Errorf("%w %s", ErrUnknownField, f)
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("invalid character after top-level value at offset %d", dec.InputOffset())
	}
	return nil
}
