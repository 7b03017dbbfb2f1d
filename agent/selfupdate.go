package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
)

// The agent replaces itself (UpdateAgent, an upgrade's molt step). It
// cannot watch its own restart, and a release that exits at start cannot
// put its predecessor back, so the operation is split between three
// processes that share the journal and one small file:
//
//  1. the agent that takes the operation downloads and verifies the new
//     binary beside its own, keeps a copy of its own binary in the data
//     directory (PrevAgentName), writes the update record
//     (SelfUpdateFile), renames the new binary over its own, journals
//     StepRestarting and asks systemd to restart its unit;
//  2. before every start of the unit, systemd runs the kept binary as
//     `molt-agent guard` (ExecStartPre): while the record says the new
//     agent has not come up, it counts the start; once the new agent was
//     started MaxAgentStarts times without coming up, it copies the kept
//     binary back over the new one and records why (Guard);
//  3. the agent that then starts — the new release, or the kept one put
//     back — confirms the record when its own release is the one wanted
//     (New), resumes the operation from the journal and reports: the new
//     release succeeds with its version, the kept one fails with the
//     guard's reason.

// Names in the agent's data directory.
const (
	// SelfUpdateFile is the update record shared with the guard.
	SelfUpdateFile = "agent-update.json"
	// PrevAgentName is the kept copy of the agent binary an update
	// replaced; the unit's ExecStartPre runs it as the guard.
	PrevAgentName = "molt-agent.prev"
	// MaxAgentStarts is how many starts a new agent release gets to come
	// up before the guard puts the kept binary back.
	MaxAgentStarts = 2
)

// StepRestarting is journaled before the agent asks systemd to restart
// it: the process that resumes the operation after it is the restarted
// one, which only reports.
const StepRestarting = "restarting"

// ErrNotRestarted means systemd did not stop the agent after it asked
// for the restart.
var ErrNotRestarted = errors.New("agent: not restarted")

// selfUpdate is the update record (SelfUpdateFile).
type selfUpdate struct {
	// Op is the UpdateAgent operation; Want the release it installs and
	// WantSHA256 its binary's; From the release it replaces.
	Op         string `json:"op"`
	Want       string `json:"want"`
	WantSHA256 string `json:"wantSHA256"`
	From       string `json:"from"`
	// Bin is the agent's binary (the unit's ExecStart), Prev the kept copy.
	Bin  string `json:"bin"`
	Prev string `json:"prev"`
	// Starts counts the guard's starts of the new release before it came
	// up; Confirmed is set by the new release once it runs.
	Starts    int  `json:"starts"`
	Confirmed bool `json:"confirmed,omitempty"`
	// RolledBack is set by the guard when it put Prev back, with Reason.
	RolledBack bool   `json:"rolledBack,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

func readSelfUpdate(path string) (selfUpdate, bool, error) {
	var s selfUpdate
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, false, fmt.Errorf("%s: %w", path, err)
	}
	return s, true, nil
}

func writeSelfUpdate(path string, s selfUpdate) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'), 0o600)
}

// Guard is `molt-agent guard`, which the unit runs from the kept binary
// before every start (ExecStartPre): it counts the starts of a new agent
// release that has not come up yet and, past MaxAgentStarts, puts the
// kept binary back. It returns what it did ("" when nothing); an error
// only when it could not read or write what it needs, and systemd starts
// the unit all the same.
func Guard(dataDir string) (string, error) {
	path := filepath.Join(dataDir, SelfUpdateFile)
	s, ok, err := readSelfUpdate(path)
	if err != nil || !ok || s.Confirmed || s.RolledBack {
		return "", err
	}
	if cur, _ := fileSHA256(s.Bin); cur != s.WantSHA256 {
		// The new binary is not in place yet (the agent stopped before
		// its swap): this start runs the agent that resumes the update.
		return "", nil
	}
	if s.Starts < MaxAgentStarts {
		s.Starts++
		if err := writeSelfUpdate(path, s); err != nil {
			return "", err
		}
		return fmt.Sprintf("starting molt-agent %s (start %d of %d before the kept %s is put back)", s.Want, s.Starts, MaxAgentStarts, s.From), nil
	}
	if err := copyFileAtomic(s.Prev, s.Bin); err != nil {
		return "", fmt.Errorf("put the kept molt-agent %s back: %w", s.From, err)
	}
	if err := os.Chmod(s.Bin, 0o755); err != nil {
		return "", err
	}
	s.RolledBack = true
	s.Reason = fmt.Sprintf("molt-agent %s did not come up: systemd started it %d times and it stopped each time before it ran; the kept molt-agent %s was put back",
		s.Want, s.Starts, s.From)
	if err := writeSelfUpdate(path, s); err != nil {
		return "", err
	}
	return s.Reason, nil
}

// confirmSelfUpdate marks the update record when this agent is the
// release it wanted: the new agent came up, and the guard leaves it be.
func (a *Agent) confirmSelfUpdate() error {
	path := a.dataPath(SelfUpdateFile)
	s, ok, err := readSelfUpdate(path)
	if err != nil || !ok || s.Confirmed || s.RolledBack || s.Want != a.cfg.Version {
		return err
	}
	s.Confirmed = true
	return writeSelfUpdate(path, s)
}

// updateAgent executes UpdateAgent. Each step is decided from the journal
// and the files, so a run resumed after a crash at any point neither
// downloads, keeps or swaps again what it did, nor restarts twice.
func (r *run) updateAgent(ctx context.Context) (map[string]string, error) {
	a := r.a
	u := r.op.UpdateAgent
	bin := a.path(a.cfg.AgentBin)
	prev := a.dataPath(PrevAgentName)
	record := a.dataPath(SelfUpdateFile)
	want := strings.ToLower(u.SHA256)
	details := map[string]string{"version": u.Version, "path": bin}
	defer func() { details[api.DetailAgentVersion] = a.cfg.Version }()
	if r.done(StepRestarting) {
		return details, r.afterRestart(ctx, record)
	}
	if a.cfg.RestartSelf == nil {
		return details, fmt.Errorf("%w: the agent cannot restart itself (no systemd)", ErrNoUnits)
	}
	if a.cfg.Version == u.Version && !r.done(StepBackedUp) {
		details["note"] = "the agent already runs molt-agent " + u.Version
		return details, nil
	}
	if !r.done(StepRenamed) {
		cur, err := fileSHA256(bin)
		if err != nil || cur == "" {
			return details, fmt.Errorf("read the agent's binary %s: %w", bin, err)
		}
		tmp := filepath.Join(filepath.Dir(bin), "."+filepath.Base(bin)+".molt-new")
		if got, _ := fileSHA256(tmp); got != want {
			if err := a.obtain(ctx, u.URL, want, tmp); err != nil {
				return details, err
			}
			if err := os.Chmod(tmp, 0o755); err != nil {
				_ = os.Remove(tmp)
				return details, err
			}
		}
		if !r.done(StepVerified) {
			if err := r.mark(ctx, StepDownloaded, nil); err != nil {
				return details, err
			}
			if err := r.mark(ctx, StepVerified, nil); err != nil {
				return details, err
			}
		}
		if !r.done(StepBackedUp) {
			// The kept copy and the record come before the swap, so the
			// guard can always put back what ran before.
			if err := copyFileAtomic(bin, prev); err != nil {
				return details, fmt.Errorf("keep the previous agent: %w", err)
			}
			if err := os.Chmod(prev, 0o755); err != nil {
				return details, err
			}
			s := selfUpdate{Op: r.op.ID, Want: u.Version, WantSHA256: want, From: a.cfg.Version, Bin: bin, Prev: prev}
			if err := writeSelfUpdate(record, s); err != nil {
				return details, err
			}
			if err := r.mark(ctx, StepBackedUp, map[string]string{"prevSHA256": cur}); err != nil {
				return details, err
			}
		}
		if cur != want {
			if err := os.Rename(tmp, bin); err != nil {
				return details, fmt.Errorf("install %s: %w", bin, err)
			}
			if err := syncDir(filepath.Dir(bin)); err != nil {
				return details, err
			}
		}
		if err := r.mark(ctx, StepRenamed, nil); err != nil {
			return details, err
		}
	}
	if a.cfg.Version == u.Version {
		// The agent stopped after the swap and systemd started the new
		// release already: nothing to restart.
		return details, r.afterRestart(ctx, record)
	}
	if err := r.mark(ctx, StepRestarting, nil); err != nil {
		return details, err
	}
	a.log.Info("restarting the agent into its new release", "version", u.Version)
	// Not ctx: systemd carries the restart out by stopping this process
	// (SIGTERM ends ctx), which may come before its answer to the call.
	rctx, cancel := context.WithTimeout(context.Background(), a.cfg.HealthTimeout)
	err := a.cfg.RestartSelf(rctx)
	cancel()
	if err != nil && ctx.Err() == nil {
		return details, r.undoSwap(ctx, bin, prev, record, fmt.Errorf("restart molt-agent: %w", err))
	}
	// systemd stops this process now; the restarted agent resumes the
	// operation at StepRestarting. A bound, not a synchronisation: if
	// systemd never stops it, the swap is undone and the update fails.
	select {
	case <-ctx.Done():
		return details, errStopped
	case <-time.After(a.cfg.HealthTimeout):
		return details, r.undoSwap(ctx, bin, prev, record, fmt.Errorf("%w: systemd did not restart molt-agent within %s", ErrNotRestarted, a.cfg.HealthTimeout))
	}
}

// afterRestart is the operation's end in the agent that runs after the
// restart: the new release reports success; the kept one, put back by
// the guard, reports the guard's reason.
func (r *run) afterRestart(ctx context.Context, record string) error {
	a := r.a
	u := r.op.UpdateAgent
	s, ok, err := readSelfUpdate(record)
	if err != nil {
		return err
	}
	ours := ok && s.Op == r.op.ID
	switch {
	case ours && s.RolledBack:
		if err := r.mark(ctx, StepRestored, nil); err != nil {
			return err
		}
		_ = os.Remove(record)
		return errors.New(s.Reason)
	case a.cfg.Version == u.Version:
		if err := r.mark(ctx, StepHealthy, nil); err != nil {
			return err
		}
		if ours {
			_ = os.Remove(record)
		}
		return nil
	default:
		if ours {
			_ = os.Remove(record)
		}
		return fmt.Errorf("after its restart the agent runs molt-agent %s, not %s", a.cfg.Version, u.Version)
	}
}

// undoSwap puts the kept binary back when the restart could not be asked
// for: this process still runs the previous release.
func (r *run) undoSwap(ctx context.Context, bin, prev, record string, cause error) error {
	if err := copyFileAtomic(prev, bin); err != nil {
		return fmt.Errorf("%w; putting the previous agent back failed: %w", cause, err)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		return err
	}
	_ = os.Remove(record)
	if err := r.mark(ctx, StepRestored, nil); err != nil {
		return err
	}
	return fmt.Errorf("%w; the previous agent was put back", cause)
}
