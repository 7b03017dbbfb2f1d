package raftstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/moltproject/molt/raftstore/command"
)

// Snapshot format, version 1 (all integers big-endian):
//
//	magic   [8]byte "MOLTSNAP"
//	version uint8   1
//	index   uint64  index of the last command the FSM applied
//	then sections until EOF, each:
//	  kind  uint8   sectionMembers | sectionMachine
//	  len   uint64
//	  data  [len]byte
//
// Raft's file snapshot store already checksums the whole stream (CRC-64), so
// the format carries no checksum of its own. Sections are typed so that
// raftstore's own data and the Machine's bytes never share an encoding, and
// so that a section can be added later; an unknown kind is an error, not
// skipped, because missing state would make replicas differ.
const (
	snapshotMagic   = "MOLTSNAP"
	snapshotVersion = 1

	sectionMembers byte = 1 // JSON map node ID → memberMeta
	sectionMachine byte = 2 // the Machine's Snapshot bytes, opaque here
)

// SnapshotFormat is the newest snapshot format this release reads and
// writes.
const SnapshotFormat = snapshotVersion

// writeFormat is the format a snapshot is written in: the newest that
// every member reads (Store.SetSnapshotFormat), never above this
// release's. A snapshot written here may be sent to any member
// (InstallSnapshot), so it must be one every member reads. Only format 1
// exists, so today every choice writes 1; the choice is made here so that
// a release that adds format 2 writes it only once every member reads it.
//
// readable is 0 when unknown: format 1, which every release reads.
func writeFormat(readable int) byte {
	return byte(min(max(readable, 1), snapshotVersion))
}

// snapshotData is everything a snapshot holds.
type snapshotData struct {
	index   uint64
	members map[string]memberMeta
	machine []byte
	// format is the format to write (writeFormat; 0 writes format 1).
	format byte
}

// writeSnapshot encodes s to w.
func writeSnapshot(w io.Writer, s snapshotData) error {
	members, err := json.Marshal(s.members)
	if err != nil {
		return fmt.Errorf("raftstore: encode members: %w", err)
	}
	bw := bufio.NewWriter(w)
	var hdr [8 + 1 + 8]byte
	copy(hdr[:8], snapshotMagic)
	hdr[8] = writeFormat(int(s.format)) // 0: format 1
	binary.BigEndian.PutUint64(hdr[9:], s.index)
	if _, err := bw.Write(hdr[:]); err != nil {
		return err
	}
	for _, sec := range []struct {
		kind byte
		data []byte
	}{{sectionMembers, members}, {sectionMachine, s.machine}} {
		var sh [9]byte
		sh[0] = sec.kind
		binary.BigEndian.PutUint64(sh[1:], uint64(len(sec.data)))
		if _, err := bw.Write(sh[:]); err != nil {
			return err
		}
		if _, err := bw.Write(sec.data); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// readSnapshot decodes a snapshot written by writeSnapshot.
func readSnapshot(r io.Reader) (snapshotData, error) {
	var s snapshotData
	all, err := io.ReadAll(r)
	if err != nil {
		return s, fmt.Errorf("raftstore: read snapshot: %w", err)
	}
	if len(all) < 17 || !bytes.Equal(all[:8], []byte(snapshotMagic)) {
		return s, fmt.Errorf("%w: bad header", ErrBadSnapshot)
	}
	// The index is read first: a newer version is expected to keep the
	// header, and the halted member names the index it stopped at.
	s.index = binary.BigEndian.Uint64(all[9:17])
	if all[8] > snapshotVersion {
		return s, fmt.Errorf("%w: %w: raftstore snapshot format %d is newer than this release reads (up to %d)", ErrBadSnapshot, command.ErrCannotRead, all[8], snapshotVersion)
	}
	if all[8] != snapshotVersion {
		return s, fmt.Errorf("%w: version %d not supported", ErrBadSnapshot, all[8])
	}
	rest := all[17:]
	var sawMembers, sawMachine bool
	for len(rest) > 0 {
		if len(rest) < 9 {
			return s, fmt.Errorf("%w: truncated section header", ErrBadSnapshot)
		}
		kind, n := rest[0], binary.BigEndian.Uint64(rest[1:9])
		rest = rest[9:]
		if n > uint64(len(rest)) {
			return s, fmt.Errorf("%w: section %d truncated", ErrBadSnapshot, kind)
		}
		data := rest[:n]
		rest = rest[n:]
		switch kind {
		case sectionMembers:
			s.members = map[string]memberMeta{}
			if err := command.DecodeBody(data, &s.members); err != nil {
				return s, fmt.Errorf("%w: members: %w", ErrBadSnapshot, err)
			}
			sawMembers = true
		case sectionMachine:
			s.machine = data
			sawMachine = true
		default:
			return s, fmt.Errorf("%w: unknown section %d", ErrBadSnapshot, kind)
		}
	}
	if !sawMembers || !sawMachine {
		return s, fmt.Errorf("%w: missing section", ErrBadSnapshot)
	}
	if s.members == nil {
		s.members = map[string]memberMeta{}
	}
	return s, nil
}

// fsmSnapshot is the point-in-time copy handed to Raft; Persist runs on
// Raft's snapshot goroutine while the FSM keeps applying.
type fsmSnapshot struct {
	data snapshotData
}

// Persist writes the snapshot to sink and closes it, or cancels it on error.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := writeSnapshot(sink, s.data); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftstore: persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release does nothing: the snapshot holds only copied bytes.
func (s *fsmSnapshot) Release() {}
