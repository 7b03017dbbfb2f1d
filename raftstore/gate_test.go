package raftstore

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// The gate (Store.SetGate) sees every proposal, raftstore's own member
// records included, with the release that reads it: a refusal is
// returned as it is and nothing is written; without a refusal the
// command commits.
func TestGateRefusesBeforeAnythingIsWritten(t *testing.T) {
	n := newSoloLeader(t)
	put(t, n.s, "a", "1")
	refused := errors.New("a member cannot read it")
	var seen []CommandType
	n.s.SetGate(func(c Command, minVersion string) error {
		seen = append(seen, c.Type())
		require.Equal(t, "0.1.0", minVersion, "what the entry's extensions would name")
		return refused
	})
	before := n.s.AppliedIndex()
	_, err := n.s.Apply(ctx(t), putBody{Key: "b", Value: "2"})
	require.ErrorIs(t, err, refused)
	err = n.s.Join(ctx(t), "solo", n.s.RaftAddr(), "127.0.0.1:9")
	require.ErrorIs(t, err, refused, "a member record (set-member) passes the gate too")
	require.Equal(t, before, n.s.AppliedIndex(), "nothing written")
	require.Equal(t, []CommandType{cmdPut, cmdSetMember}, seen)

	n.s.SetGate(nil)
	put(t, n.s, "b", "2")
}

// What a snapshot is written in: the newest format every member reads,
// never newer than this release's; unknown (0) is format 1.
func TestSnapshotFormatIsTheNewestEveryMemberReads(t *testing.T) {
	require.Equal(t, byte(1), writeFormat(0))
	require.Equal(t, byte(1), writeFormat(1))
	require.Equal(t, byte(SnapshotFormat), writeFormat(SnapshotFormat+1), "a member that reads more does not make this release write what it cannot")
	n := newSoloLeader(t)
	require.Equal(t, 1, n.s.SnapshotFormatWritten())
	n.s.SetSnapshotFormat(7)
	require.Equal(t, SnapshotFormat, n.s.SnapshotFormatWritten())
}
