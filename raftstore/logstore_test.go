package raftstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

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
