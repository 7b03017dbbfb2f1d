package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/migrate"
	"go.etcd.io/bbolt"
)

// The Raft log and stable store live in DataDir/wal/: hashicorp's
// raft-wal, append-only segment files fsync'd once per append (a batch of
// entries), with the stable store (term, vote) and the segment list in a
// small bolt file beside them. Before, they lived in DataDir/raft.db, one
// bolt file, whose every append cost two fsyncs (pages, then meta) — the
// larger part of a commit's latency (docs/performance.md, P4). A data
// directory that still holds raft.db is migrated on Open: every log entry
// and the stable keys are copied into wal.tmp/, which is fsync'd and
// renamed to wal/; raft.db is then renamed raft.db.migrated and kept.
// A crash before the rename leaves raft.db in charge and the copy is
// made again; after it, wal/ is.
const (
	walDir      = "wal"
	walTmpDir   = "wal.tmp"
	migratedBak = boltFile + ".migrated"
	lockFile    = "lock"
)

// logStore is the Raft log and stable store.
type logStore interface {
	raft.LogStore
	raft.StableStore
	Close() error
}

// HasState reports whether dataDir holds a member's Raft log (in either
// format): a member that starts on it resumes, rather than bootstraps or
// joins.
func HasState(dataDir string) bool {
	for _, p := range []string{walDir, boltFile} {
		if _, err := os.Stat(filepath.Join(dataDir, p)); err == nil {
			return true
		}
	}
	return false
}

// lockDataDir takes an exclusive lock on dataDir, waiting up to timeout:
// two members on one data directory would corrupt it. The lock ends when
// the returned file is closed (or the process exits).
func lockDataDir(dataDir string, timeout time.Duration) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dataDir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("data directory %s is locked by another process: %w", dataDir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openLogStore opens DataDir/wal/, migrating DataDir/raft.db into it first
// when that is what the directory holds.
func openLogStore(dataDir string, log *slog.Logger) (logStore, error) {
	dir := filepath.Join(dataDir, walDir)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dataDir, boltFile)); err == nil {
			if err := migrateBolt(dataDir, log); err != nil {
				return nil, fmt.Errorf("migrate %s to %s: %w", boltFile, walDir, err)
			}
		} else if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, err
		}
	}
	return openWAL(dir)
}

// walStore is a WAL with its metadata store, which WAL.Close leaves open
// (raft-wal v0.4.2 still does): a member reopened in the same process would wait
// forever for the bolt lock it still holds.
type walStore struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
}

// walSegmentSize, when not zero, replaces raft-wal's segment size (64 MiB).
// Compaction deletes whole segments only, and the tail segment still
// serves entries below the first index, so a test that needs entries
// really gone (a member catching up from a snapshot) makes segments small.
var walSegmentSize int

func openWAL(dir string) (*walStore, error) {
	meta := &metadb.BoltMetaDB{}
	var w *wal.WAL
	var err error
	if walSegmentSize > 0 {
		w, err = wal.Open(dir, wal.WithMetaStore(meta), wal.WithSegmentSize(walSegmentSize))
	} else {
		w, err = wal.Open(dir, wal.WithMetaStore(meta))
	}
	if err != nil {
		_ = meta.Close()
		return nil, err
	}
	return &walStore{WAL: w, meta: meta}, nil
}

// Close closes the WAL and its metadata store.
func (w *walStore) Close() error { return errors.Join(w.WAL.Close(), w.meta.Close()) }

// migrateBolt copies raft.db's log and stable store into a new WAL.
func migrateBolt(dataDir string, log *slog.Logger) error {
	tmp := filepath.Join(dataDir, walTmpDir)
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	src, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dataDir, boltFile),
		BoltOptions: &bbolt.Options{Timeout: boltOpenTimeout, ReadOnly: true},
	})
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openWAL(tmp)
	if err != nil {
		return err
	}
	ctx := context.Background()
	err = migrate.CopyStable(ctx, dst, src, nil, nil, nil)
	if last, lerr := src.LastIndex(); err == nil && (lerr != nil || last > 0) {
		err = errors.Join(lerr, migrate.CopyLogs(ctx, dst, src, 1<<20, nil))
	}
	if err == nil {
		err = sameRange(dst, src)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dataDir, walDir)); err != nil {
		return err
	}
	if err := syncDir(dataDir); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dataDir, boltFile), filepath.Join(dataDir, migratedBak)); err != nil {
		return err
	}
	first, _ := src.FirstIndex()
	last, _ := src.LastIndex()
	log.Info("Raft log migrated from bolt to the WAL", "first_index", first, "last_index", last, "kept", migratedBak)
	return syncDir(dataDir)
}

// sameRange checks that a copied log holds the same indexes as its source.
func sameRange(dst, src raft.LogStore) error {
	sf, err1 := src.FirstIndex()
	sl, err2 := src.LastIndex()
	df, err3 := dst.FirstIndex()
	dl, err4 := dst.LastIndex()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	if sf != df || sl != dl {
		return fmt.Errorf("copied log holds %d–%d, the source %d–%d", df, dl, sf, sl)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
