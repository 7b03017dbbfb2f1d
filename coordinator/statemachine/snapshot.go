package statemachine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/raftstore/command"
)

// Snapshot format of the coordinator's state (the Machine bytes inside
// raftstore's snapshot file). Snapshots outlive releases: a release reads
// every version up to its own and refuses a newer one as
// command.ErrCannotRead (raftstore halts the replica rather than fail).
//
//	version 1 (this release writes it):
//	    "molt-coordinator-snapshot 1\n" then stateV1 as JSON
//	version 0 (releases before the header): stateV1 as JSON alone; its
//	    first byte is '{', which no header starts with
//
// The JSON body is json.Marshal of the state's persisted form, stateV1
// (persisted.go): map keys sorted, so equal states give equal bytes. A
// field added to the V1 types is read as its zero value from older
// snapshots; anything else (a field renamed, a meaning changed) needs a
// new version number, new persisted types and their own decoding here.
const (
	snapshotMagic   = "molt-coordinator-snapshot"
	snapshotVersion = 1
)

// writeFormat is the format a snapshot is written in, given the newest
// every member reads (0: unknown, format 1).
func writeFormat(readable int) int { return min(max(readable, 1), snapshotVersion) }

// encodeSnapshot writes st in format (writeFormat; this release writes
// only version 1).
func encodeSnapshot(st *state, format int) ([]byte, error) {
	if format != 1 {
		return nil, fmt.Errorf("coordinator: snapshot format %d cannot be written by this release", format)
	}
	js, err := json.Marshal(stateToV1(st))
	if err != nil {
		return nil, fmt.Errorf("coordinator: snapshot: %w", err)
	}
	hdr := snapshotMagic + " " + strconv.Itoa(format) + "\n"
	return append([]byte(hdr), js...), nil
}

// decodeSnapshot builds a fresh state from a snapshot of any version this
// release reads, and returns the version it found. Errors wrap
// command.ErrBadSnapshot.
func decodeSnapshot(data []byte) (*state, int, error) {
	version, body := 0, data
	if len(data) == 0 || data[0] != '{' {
		rest, ok := bytes.CutPrefix(data, []byte(snapshotMagic+" "))
		if !ok {
			return nil, 0, fmt.Errorf("%w: not a coordinator snapshot (no %q header, no legacy JSON)", command.ErrBadSnapshot, snapshotMagic)
		}
		line, b, ok := bytes.Cut(rest, []byte("\n"))
		v, err := strconv.Atoi(string(line))
		if !ok || err != nil || v < 1 || string(line) != strconv.Itoa(v) {
			return nil, 0, fmt.Errorf("%w: coordinator snapshot header has no valid version: %q", command.ErrBadSnapshot, line)
		}
		if v > snapshotVersion {
			return nil, v, fmt.Errorf("%w: %w: coordinator snapshot format version %d is newer than this release reads (up to %d); run a newer molt-coordinator",
				command.ErrBadSnapshot, command.ErrCannotRead, v, snapshotVersion)
		}
		version, body = v, b
	}
	var v1 stateV1
	if err := command.DecodeBody(body, &v1); err != nil {
		return nil, version, fmt.Errorf("%w: coordinator snapshot version %d: %w", command.ErrBadSnapshot, version, err)
	}
	var d v1Decoder
	st := d.state(v1)
	if d.err != nil {
		return nil, version, fmt.Errorf("%w: coordinator snapshot version %d: %w", command.ErrBadSnapshot, version, d.err)
	}
	if st.Clusters == nil {
		st.Clusters = map[string]*ClusterRecord{}
	}
	if st.Releases == nil {
		st.Releases = map[string]*api.Release{}
	}
	return st, version, nil
}
