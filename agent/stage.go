package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The artifact stage keeps the release artifacts a CheckArtifacts
// verified on the agent's disk, so that the upgrade operations that need
// them later (UpgradeBinary, ImportImages) take them from there instead of
// fetching them again: the artifact server sends each host one copy per
// upgrade, not two (docs/agent.md, Artifact stage).
//
// <DataDir>/stage holds:
//
//	<sha256>  a verified artifact, named by the sha256 of its bytes
//	          (64 lowercase hex digits), mode 0600
//	.tmp-*    an artifact being fetched; removed at start
//	upgrade   the ID of the upgrade the stage was filled for; absent or
//	          empty: unknown (an older coordinator's, or before any)
//
// A file gets its sha256 name only by a rename after its bytes were
// fsynced and their sum and size checked, so a crash leaves a temp file at
// worst, never a half file under a sha256 name. An operation hashes the
// bytes again as it copies them out; a staged file whose bytes no longer
// match its name is removed and the artifact downloaded as before.
//
// The stage never holds more than Config.StageMaxBytes: to keep a new
// artifact the oldest entries give way (oldest first rather than "keep
// nothing more once full", because an entry nobody will ask for again —
// a signal missed, or a coordinator too old to give one — would otherwise
// turn staging off for good). An artifact larger than the bound, or of
// unknown size, is verified but not kept, and a log line says so.
const (
	stageLabel      = "upgrade"
	stageTempPrefix = ".tmp-"
	// stageKeepFree is the free space an artifact kept must leave on the
	// stage's filesystem: preflight.DefaultMinFreeBytes, the least the
	// disk-space check asks by default, so keeping artifacts never fails
	// that check by itself (it reads free space after the stage was
	// filled). On a control-plane host that filesystem may be etcd's.
	stageKeepFree uint64 = 2 << 30
)

// stage is the artifact stage of one agent. Operations run one at a time,
// so nothing contends for it; mu still guards its files and label so that
// no method sees another's half-done change.
type stage struct {
	dir      string
	max      int64 // Config.StageMaxBytes; 0: nothing is kept
	keepFree uint64
	now      func() time.Time
	log      *slog.Logger

	mu    sync.Mutex
	label string // the upgrade the entries were kept for; "": unknown
}

// openStage opens the stage in dir: it removes temp files a crash or stop
// left, and anything else that is not an entry, keeps the entries (their
// bytes are checked when used) and evicts the oldest beyond max (the
// bound may have been lowered). With max 0 it removes dir: staging is off
// and nothing an earlier run kept is of use. A stage that cannot be
// opened is logged and turned off; the agent works without one.
func openStage(dir string, max int64, now func() time.Time, log *slog.Logger) *stage {
	s := &stage{dir: dir, max: max, keepFree: stageKeepFree, now: now, log: log.With("stage", dir)}
	if max <= 0 {
		if err := os.RemoveAll(dir); err != nil {
			s.log.Warn("removing the artifact stage failed", "err", err)
		}
		return s
	}
	if err := s.open(); err != nil {
		s.log.Warn("artifact stage unusable; artifacts will not be kept", "err", err)
		s.max = 0
	}
	return s
}

func (s *stage) open() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == stageLabel && e.Type().IsRegular():
			b, err := os.ReadFile(filepath.Join(s.dir, name))
			if err != nil {
				return err
			}
			s.label = strings.TrimSpace(string(b))
		case isSHA256(name) && e.Type().IsRegular():
		default:
			if err := os.RemoveAll(filepath.Join(s.dir, name)); err != nil {
				return err
			}
			s.log.Info("removed from the artifact stage at start", "file", name)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evict(0)
	return nil
}

// on reports whether the stage keeps artifacts at all.
func (s *stage) on() bool { return s.max > 0 }

// isSHA256 reports whether name is a sha256 in lowercase hex, the only
// names the stage gives its entries (and so never a path).
func isSHA256(name string) bool {
	if len(name) != 2*sha256.Size {
		return false
	}
	for _, c := range name {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// staged is one entry of the stage.
type staged struct {
	sum     string
	size    int64
	modTime time.Time
}

// entries lists the stage's entries, oldest first, and their total size.
func (s *stage) entries() ([]staged, int64) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, 0
	}
	var out []staged
	var total int64
	for _, e := range des {
		if !isSHA256(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, staged{sum: e.Name(), size: fi.Size(), modTime: fi.ModTime()})
		total += fi.Size()
	}
	slices.SortFunc(out, func(a, b staged) int {
		if c := a.modTime.Compare(b.modTime); c != 0 {
			return c
		}
		return strings.Compare(a.sum, b.sum)
	})
	return out, total
}

// evict removes the oldest entries until need more bytes fit within max,
// and reports whether they do. s.mu is held.
func (s *stage) evict(need int64) bool {
	all, total := s.entries()
	for _, e := range all {
		if total+need <= s.max {
			break
		}
		if err := os.Remove(filepath.Join(s.dir, e.sum)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("evicting from the artifact stage failed", "sha256", e.sum, "err", err)
			continue
		}
		total -= e.size
		s.log.Info("artifact evicted from the stage to make room", "sha256", e.sum, "bytes", e.size)
	}
	return total+need <= s.max
}

// begin starts keeping the artifact whose sha256 is sum and whose size is
// size bytes (-1: unknown): it makes room and returns the temp file to
// fill, or nil when the artifact is not kept — staging off, already kept
// (then it counts as new for eviction), size unknown or over the bound,
// too little free space left, or an I/O error — which it logs.
func (s *stage) begin(sum string, size int64) *stageWrite {
	if !s.on() || !isSHA256(sum) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	path := filepath.Join(s.dir, sum)
	if _, err := os.Stat(path); err == nil {
		now := s.now()
		_ = os.Chtimes(path, now, now)
		return nil
	}
	notKept := func(why string, args ...any) *stageWrite {
		s.log.Info("artifact verified but not kept in the stage: "+why, append([]any{"sha256", sum, "bytes", size}, args...)...)
		return nil
	}
	switch {
	case size < 0:
		return notKept("its size is not known in advance")
	case size > s.max:
		return notKept("larger than the stage's bound", "maxBytes", s.max)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &st); err != nil {
		return notKept("free space unknown", "err", err)
	}
	// Count what eviction would free as free: the check is of the
	// filesystem after this artifact is in and the oldest are out.
	entries, total := s.entries()
	freed := int64(0)
	for _, e := range entries {
		if total-freed+size <= s.max {
			break
		}
		freed += e.size
	}
	if free := st.Bavail*uint64(st.Bsize) + uint64(freed); free < uint64(size)+s.keepFree {
		return notKept("it would leave too little free space", "freeBytes", free, "keepFreeBytes", s.keepFree)
	}
	if !s.evict(size) {
		return notKept("no room could be made", "maxBytes", s.max)
	}
	f, err := os.CreateTemp(s.dir, stageTempPrefix+"*")
	if err != nil {
		return notKept("creating its file failed", "err", err)
	}
	return &stageWrite{s: s, f: f, sum: sum, size: size}
}

// stageWrite is an artifact being kept. It never fails a Write, so the
// fetch and its verification go on whatever happens to the copy: a copy
// that fails (a write error, more bytes than announced) is simply not
// kept.
type stageWrite struct {
	s    *stage
	f    *os.File
	sum  string
	size int64
	n    int64
	err  error // the first failure; the artifact is then not kept
}

func (w *stageWrite) Write(p []byte) (int, error) {
	if w.err == nil {
		if w.n+int64(len(p)) > w.size {
			w.err = fmt.Errorf("more than the %d bytes announced", w.size)
		} else if _, err := w.f.Write(p); err != nil {
			w.err = err
		}
	}
	w.n += int64(len(p))
	return len(p), nil
}

// finish gives the file its sha256 name when the artifact was verified
// (sum and size) and the file holds all of it, fsynced; otherwise it
// removes the file.
func (w *stageWrite) finish(verified bool) {
	tmp := w.f.Name()
	err := w.err
	if err == nil && w.n != w.size {
		err = fmt.Errorf("%d bytes fetched, %d announced", w.n, w.size)
	}
	if err == nil && verified {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil || !verified {
		_ = os.Remove(tmp)
		if verified {
			w.s.log.Warn("artifact verified but not kept in the stage", "sha256", w.sum, "err", err)
		}
		return
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if err := os.Rename(tmp, filepath.Join(w.s.dir, w.sum)); err != nil {
		_ = os.Remove(tmp)
		w.s.log.Warn("artifact verified but not kept in the stage", "sha256", w.sum, "err", err)
		return
	}
	if err := syncDir(w.s.dir); err != nil {
		w.s.log.Warn("fsync of the artifact stage failed", "err", err)
	}
	w.s.log.Info("artifact kept in the stage", "sha256", w.sum, "bytes", w.size, "upgrade", w.s.label)
}

// copyTo copies the staged artifact sum into the file path (created or
// truncated, fsynced), hashing the bytes as it copies them, and returns
// how many it copied and whether path now holds the artifact. When the
// stage has no such entry, or its bytes no longer hash to sum (then it is
// removed), or the copy fails, path is removed and it returns false: the
// caller downloads the artifact as it would without a stage.
func (s *stage) copyTo(sum, path string) (int64, bool) {
	if !s.on() || !isSHA256(sum) {
		return 0, false
	}
	src, err := os.Open(filepath.Join(s.dir, sum))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("reading the artifact stage failed", "sha256", sum, "err", err)
		}
		return 0, false
	}
	defer src.Close()
	n, got, err := copyHashed(src, path)
	if err != nil {
		_ = os.Remove(path)
		s.log.Warn("copy from the artifact stage failed; downloading", "sha256", sum, "err", err)
		return 0, false
	}
	if got != sum {
		_ = os.Remove(path)
		s.mu.Lock()
		rerr := os.Remove(filepath.Join(s.dir, sum))
		s.mu.Unlock()
		s.log.Warn("staged artifact no longer matches its sha256; removed, downloading", "sha256", sum, "got", got, "removeErr", rerr)
		return 0, false
	}
	return n, true
}

// copyHashed copies src into the file path (created or truncated) and
// fsyncs it; it returns the bytes copied and their sha256 in hex.
func copyHashed(src io.Reader, path string) (int64, string, error) {
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(dst, h), src)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return n, hex.EncodeToString(h.Sum(nil)), err
}

// upgradeInProgress applies what the coordinator said of the cluster's
// upgrade in progress: none ("") empties the stage; one names the upgrade
// the stage is for (belongTo).
func (s *stage) upgradeInProgress(upgrade string) {
	if !s.on() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if upgrade == "" {
		s.clear("no upgrade in progress")
		return
	}
	s.belongTo(upgrade)
}

// fillFor is called before a CheckArtifacts of upgrade keeps artifacts.
func (s *stage) fillFor(upgrade string) {
	if !s.on() || upgrade == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.belongTo(upgrade)
}

// belongTo makes the stage upgrade's: entries kept for another upgrade
// are removed; entries of unknown origin (kept before the coordinator
// named upgrades, or by a CheckArtifacts of no named upgrade) are
// adopted: nothing says they are of no use, the bound still holds, and
// the end of upgrade removes them. s.mu is held.
func (s *stage) belongTo(upgrade string) {
	if s.label == upgrade {
		return
	}
	if s.label != "" {
		s.clear("upgrade " + upgrade + " is in progress, not " + s.label)
	}
	if err := writeFileAtomic(filepath.Join(s.dir, stageLabel), []byte(upgrade+"\n"), 0o600); err != nil {
		// Unlabelled entries are adopted by the next upgrade named; the
		// bound holds meanwhile.
		s.log.Warn("labelling the artifact stage failed", "upgrade", upgrade, "err", err)
		return
	}
	s.label = upgrade
}

// clear removes every entry and the label. s.mu is held.
func (s *stage) clear(why string) {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		s.log.Warn("emptying the artifact stage failed", "err", err)
		return
	}
	removed := 0
	for _, e := range des {
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			s.log.Warn("emptying the artifact stage failed", "file", e.Name(), "err", err)
			continue
		}
		if e.Name() != stageLabel {
			removed++
		}
	}
	s.label = ""
	if removed > 0 {
		s.log.Info("artifact stage emptied: "+why, "removed", removed)
	}
}
