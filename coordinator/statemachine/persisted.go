package statemachine

import (
	"fmt"

	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore/command"
)

// The persisted format: what Raft log entries and snapshots hold on disk,
// and what replicas exchange. It outlives releases, so it is declared
// apart from everything that may change.
//
// The bytes are the JSON of the types in the persisted_v1_*.go files,
// named …V1, and of nothing else. Every command encodes through its V1
// form (MarshalJSON and UnmarshalJSON in persisted_v1_commands.go), and a
// snapshot's body is stateV1 (snapshot.go). The values this package keeps
// in memory and takes in commands — the engine's types (phases,
// preflight, maintenance), the API's wire types (api), its own records —
// are never encoded as they are (the engine's carry no JSON tags, the
// API's tags are its wire format), and may change freely: conversions to and from the
// V1 types happen when a command is encoded or decoded and when a
// snapshot is written or read.
//
// The V1 types are append-only. A field may be added (entries and
// snapshots written before it decode it as its zero value, so the apply
// functions must treat zero as "absent"; it is written omitempty or
// omitzero, so that entries which do not use it stay readable by the
// release before, which decodes strictly: see below); a field is never renamed,
// retyped, removed, or given another meaning. A change that cannot be an
// addition is a new version: new types (…V2), decoded beside the old ones
// (a new snapshot format version in snapshot.go; for commands, a new
// command number), while the V1 types stay to read what is already on
// disk. Whatever the engine becomes, its conversions must keep old logs
// applying to the same state: golden_test.go replays a checked-in log and
// compares with a checked-in snapshot, persisted_v1_test.go fills every
// field of both sides and requires lossless conversions, and
// testdata/persisted-v1/ pins the encoding of every V1 field.
//
// Decoding is strict (raftstore/command.DecodeBody): a field a V1 type
// does not declare, at any depth, is an error wrapping
// command.ErrUnknownField. A command that holds one is refused, not
// applied without it (decodeBody in fsm.go), and raftstore halts the
// replica there; a snapshot that holds one does not restore. What this release writes decodes, as the golden
// log, snapshots and command files show.

// v1Decoder collects the first error of a conversion from the V1 types,
// so that the converters read as field lists rather than error checks.
type v1Decoder struct{ err error }

// version reads a version as the V1 types keep it, "1.N.X"; "" is the
// zero version.
func (d *v1Decoder) version(s string) phases.Version {
	if s == "" || d.err != nil {
		return phases.Version{}
	}
	v, err := phases.ParseVersion(s)
	if err != nil {
		d.err = err
	}
	return v
}

// unmarshalV1 decodes a command through its V1 form, strictly: a field
// the V1 type does not declare is an error wrapping
// command.ErrUnknownField, which the apply function returns as a
// refusal (decodeBody). Any other error means the bytes are not a
// command of this type: the apply function panics on it, as replicas
// that cannot read an entry have diverged.
func unmarshalV1[C, P any](b []byte, c *C, fromV1 func(*v1Decoder, P) C) error {
	var p P
	if err := command.DecodeBody(b, &p); err != nil {
		return err
	}
	var d v1Decoder
	v := fromV1(&d, p)
	if d.err != nil {
		return fmt.Errorf("%T: %w", p, d.err)
	}
	*c = v
	return nil
}
