package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
)

// Step names recorded in the journal and passed to Hooks.At. Each marks
// a boundary after which the named effect is durable on disk.
const (
	StepStarted    = "started"    // operation accepted; body recorded
	StepDownloaded = "downloaded" // artifact in a temp file beside its target
	StepVerified   = "verified"   // sha256 matched
	StepBackedUp   = "backed-up"  // previous binary / manifests saved
	StepRenamed    = "renamed"    // new binary atomically in place
	StepWritten    = "written"    // new manifests atomically in place
	StepRestarted  = "restarted"  // unit restart job done
	StepHealthy    = "healthy"    // component / pods healthy
	StepRestoring  = "restoring"  // health failed; restoring the previous state
	StepRestored   = "restored"   // previous state back in place
	StepImported   = "imported"   // images imported / pulled
	StepFinished   = "finished"   // result recorded; never executed again
	StepReported   = "reported"   // the coordinator acknowledged the result
)

// ErrJournalCorrupt means a journal line other than a torn last one does
// not parse: the file was damaged by something other than a crash.
var ErrJournalCorrupt = errors.New("agent: journal corrupt")

// errJournal wraps failures to write the journal: without a durable record
// the agent must not go on, so such an error stops Run.
var errJournal = errors.New("agent: journal write")

// record is one journal line.
type record struct {
	Time      time.Time            `json:"time"`
	ID        string               `json:"id"`
	Step      string               `json:"step"`
	Operation *api.Operation       `json:"operation,omitempty"`
	Result    *api.OperationResult `json:"result,omitempty"`
	Data      map[string]string    `json:"data,omitempty"`
}

// opState is what the journal knows of one operation.
type opState struct {
	Op       api.Operation
	Started  time.Time
	Steps    map[string]bool
	Data     map[string]string
	Result   *api.OperationResult
	Reported bool
	seq      int // order of first appearance
}

// journal is an append-only JSON-lines file. Each append is fsync'd
// before it returns, so a step recorded is a step that survives a crash.
// A crash mid-append leaves a torn last line, which open drops: the step
// it described is redone, which every step tolerates.
type journal struct {
	mu   sync.Mutex
	f    *os.File
	ops  map[string]*opState
	next int
	now  func() time.Time
}

// maxFinished is how many finished operations a compaction keeps; older
// IDs are forgotten (the coordinator never re-sends IDs that old).
const maxFinished = 500

func openJournal(path string, now func() time.Time) (*journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("agent: journal dir: %w", err)
	}
	j := &journal{ops: map[string]*opState{}, now: now}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("agent: read journal: %w", err)
	}
	lines := bytes.Split(data, []byte("\n"))
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r record
		if err := json.Unmarshal(line, &r); err != nil {
			if i == len(lines)-1 { // torn by a crash mid-write
				break
			}
			return nil, fmt.Errorf("%w: %s line %d: %w", ErrJournalCorrupt, path, i+1, err)
		}
		j.apply(r)
	}
	// Rewrite compacted: drops a torn tail and bounds the file's growth.
	if err := j.rewrite(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent: open journal: %w", err)
	}
	j.f = f
	return j, nil
}

func (j *journal) apply(r record) {
	st := j.ops[r.ID]
	if st == nil {
		st = &opState{Steps: map[string]bool{}, Data: map[string]string{}, seq: j.next, Started: r.Time}
		j.next++
		j.ops[r.ID] = st
	}
	if r.Operation != nil {
		st.Op = *r.Operation
	}
	st.Steps[r.Step] = true
	for k, v := range r.Data {
		st.Data[k] = v
	}
	if r.Result != nil {
		st.Result = r.Result
	}
	if r.Step == StepReported {
		st.Reported = true
	}
}

// rewrite writes the compacted journal to a temp file and renames it over
// path, so the journal is always either the old or the new file.
func (j *journal) rewrite(path string) error {
	ordered := j.ordered()
	finished := 0
	for _, st := range ordered {
		if st.Result != nil {
			finished++
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, st := range ordered {
		if st.Result != nil && finished > maxFinished {
			finished--
			delete(j.ops, st.Op.ID)
			continue
		}
		op := st.Op
		// One line per operation keeps everything open needs to resume.
		if err := enc.Encode(record{Time: st.Started, ID: op.ID, Step: StepStarted, Operation: &op, Data: st.Data}); err != nil {
			return err
		}
		for step := range st.Steps {
			if step == StepStarted || step == StepFinished || step == StepReported {
				continue
			}
			_ = enc.Encode(record{Time: st.Started, ID: op.ID, Step: step})
		}
		if st.Result != nil {
			_ = enc.Encode(record{Time: st.Result.FinishedAt, ID: op.ID, Step: StepFinished, Result: st.Result})
		}
		if st.Reported {
			_ = enc.Encode(record{Time: st.Started, ID: op.ID, Step: StepReported})
		}
	}
	if err := writeFileAtomic(path, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("agent: compact journal: %w", err)
	}
	return nil
}

func (j *journal) ordered() []*opState {
	out := make([]*opState, j.next)
	n := 0
	for _, st := range j.ops {
		out[st.seq] = st
		n++
	}
	compact := out[:0]
	for _, st := range out {
		if st != nil {
			compact = append(compact, st)
		}
	}
	return compact
}

// append records r durably.
func (j *journal) append(r record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r.Time.IsZero() {
		r.Time = j.now()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := j.f.Write(b); err != nil {
		return fmt.Errorf("%w: %w", errJournal, err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("%w: fsync: %w", errJournal, err)
	}
	j.apply(r)
	return nil
}

// get returns a copy of what the journal knows of id.
func (j *journal) get(id string) (opState, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	st, ok := j.ops[id]
	if !ok {
		return opState{}, false
	}
	cp := *st
	cp.Steps = cloneMap(st.Steps)
	cp.Data = cloneMap(st.Data)
	return cp, true
}

// pending returns operations without a result, and results not yet
// acknowledged, in journal order.
func (j *journal) pending() (unfinished []api.Operation, unreported []api.OperationResult) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, st := range j.ordered() {
		switch {
		case st.Result == nil:
			unfinished = append(unfinished, st.Op)
		case !st.Reported:
			unreported = append(unreported, *st.Result)
		}
	}
	return unfinished, unreported
}

// last returns the most recent finished result, or nil.
func (j *journal) last() *api.OperationResult {
	j.mu.Lock()
	defer j.mu.Unlock()
	var best *api.OperationResult
	for _, st := range j.ops {
		if st.Result != nil && (best == nil || st.Result.FinishedAt.After(best.FinishedAt)) {
			best = st.Result
		}
	}
	if best == nil {
		return nil
	}
	cp := *best
	return &cp
}

func (j *journal) close() error { return j.f.Close() }

func cloneMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
