package raftstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/hashicorp/raft-wal/migrate"
	"github.com/stretchr/testify/require"
)

// TestBoltLogMigratesToTheWAL: a data directory whose log is in raft.db,
// as releases before the WAL wrote it, opens with every entry: the log is
// copied into wal/, raft.db is kept as raft.db.migrated, and the member
// replays its state and goes on committing.
func TestBoltLogMigratesToTheWAL(t *testing.T) {
	n := newSoloLeader(t)
	a := put(t, n.s, "a", "1")
	b := put(t, n.s, "b", "2")
	require.NoError(t, n.s.Close())

	// Turn the WAL back into the raft.db an older release left.
	dir := n.cfg.DataDir
	src, err := openWAL(filepath.Join(dir, walDir))
	require.NoError(t, err)
	old, err := raftboltdb.NewBoltStore(filepath.Join(dir, boltFile))
	require.NoError(t, err)
	require.NoError(t, migrate.CopyLogs(context.Background(), old, src, 1<<20, nil))
	require.NoError(t, migrate.CopyStable(context.Background(), old, src, nil, nil, nil))
	last, err := src.LastIndex()
	require.NoError(t, err)
	require.NoError(t, src.Close())
	require.NoError(t, old.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(dir, walDir)))
	require.True(t, HasState(dir), "raft.db alone is a member's state")

	n.open(t)
	require.DirExists(t, filepath.Join(dir, walDir))
	require.FileExists(t, filepath.Join(dir, migratedBak))
	require.NoFileExists(t, filepath.Join(dir, boltFile))
	require.NoDirExists(t, filepath.Join(dir, walTmpDir))
	waitFor(t, "leader again", n.s.IsLeader)
	waitFor(t, "the log replayed", func() bool { return n.s.AppliedIndex() >= last })
	require.Equal(t, map[string]kvEntry{"a": {"1", a}, "b": {"2", b}}, n.kv.dump())
	c := put(t, n.s, "c", "3")
	require.Greater(t, c, last)
}

// TestSecondOpenOfADataDirFails: a second member on the same data
// directory is refused, not left waiting forever.
func TestSecondOpenOfADataDirFails(t *testing.T) {
	n := newSoloLeader(t)
	cfg := n.cfg
	cfg.RaftAddr = "127.0.0.1:0"
	_, err := Open(cfg, newKV())
	require.ErrorContains(t, err, "locked by another process")
}

// TestLogTruncatedAtItsTailReopens: a follower whose log conflicts with a
// new leader's deletes its tail ("clearing log suffix"), which can delete
// whole segments; the log must then reopen with every entry left. raft-wal
// before v0.4.1 sealed the segment left as the tail without its index
// block, and the member's next start panicked in raft.NewRaft with
// "sealed segment has no index block" (hashicorp/raft-wal#31, seen under
// load in TestMIGBlueGreenLeaderKilledInEveryPhase).
func TestLogTruncatedAtItsTailReopens(t *testing.T) {
	defer func(was int) { walSegmentSize = was }(walSegmentSize)
	walSegmentSize = 4096
	dir := t.TempDir()
	w, err := openWAL(dir)
	require.NoError(t, err)
	data := make([]byte, 256)
	for i := uint64(1); i <= 44; i += 4 { // ~1 KiB a batch: a new segment every 4 or so
		var logs []*raft.Log
		for j := i; j < i+4; j++ {
			logs = append(logs, &raft.Log{Index: j, Term: 1, Data: data})
		}
		require.NoError(t, w.StoreLogs(logs))
	}
	require.NoError(t, w.DeleteRange(44, 44), "the last entry, in the segment being written")
	require.NoError(t, w.Close())

	w, err = openWAL(dir)
	require.NoError(t, err)
	defer w.Close()
	first, err := w.FirstIndex()
	require.NoError(t, err)
	last, err := w.LastIndex()
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 43}, []uint64{first, last})
	for i := first; i <= last; i++ {
		var l raft.Log
		require.NoError(t, w.GetLog(i, &l), "entry %d", i)
	}
	require.NoError(t, w.StoreLogs([]*raft.Log{{Index: 44, Term: 2, Data: data}}), "appends go on from there")
}
