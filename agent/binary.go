package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
)

// Sentinel errors of binary upgrades.
var (
	// ErrUnhealthy means the component did not become healthy in time.
	ErrUnhealthy = errors.New("component not healthy")
	// ErrNoUnits means no Units implementation was configured.
	ErrNoUnits = errors.New("no systemd unit control configured")
)

// prevSuffix names the copy of the previous binary kept for rollback.
const prevSuffix = ".molt-prev"

// binaryTarget returns the host path and unit of a component.
func (a *Agent) binaryTarget(c api.Component) (bin, unit string) {
	if c == api.ComponentContainerd {
		return a.path(a.cfg.ContainerdBin), a.cfg.ContainerdUnit
	}
	return a.path(a.cfg.KubeletBin), a.cfg.KubeletUnit
}

// upgradeBinary installs a verified binary and restarts its unit; if the
// component is not healthy within HealthTimeout the previous binary is
// restored. Each step is decided from the file contents and the journal,
// so a resumed run neither redoes a finished effect nor skips one: in
// particular the backup is taken only once, before the rename, so it can
// never hold the new binary.
func (r *run) upgradeBinary(ctx context.Context) (map[string]string, error) {
	u := r.op.UpgradeBinary
	a := r.a
	bin, unit := a.binaryTarget(u.Component)
	want := strings.ToLower(u.SHA256)
	details := map[string]string{"component": string(u.Component), "version": u.Version, "path": bin}
	if a.cfg.Units == nil {
		return details, ErrNoUnits
	}
	if r.done(StepRestoring) {
		return details, r.restoreBinary(ctx, bin, unit, "health check failed before the agent restarted")
	}
	cur, err := fileSHA256(bin)
	if err != nil {
		return details, fmt.Errorf("read current %s: %w", bin, err)
	}
	if cur != want {
		// The temp file sits beside the target so the rename is atomic
		// (same filesystem) and a full disk fails here, before any change.
		tmp := filepath.Join(filepath.Dir(bin), "."+filepath.Base(bin)+".molt-new")
		if err := a.obtain(ctx, u.URL, want, tmp); err != nil {
			return details, err
		}
		if err := os.Chmod(tmp, 0o755); err != nil {
			_ = os.Remove(tmp)
			return details, err
		}
		if err := r.mark(ctx, StepDownloaded, nil); err != nil {
			return details, err
		}
		if err := r.mark(ctx, StepVerified, nil); err != nil {
			return details, err
		}
		if !r.done(StepBackedUp) {
			if cur != "" {
				if err := copyFileAtomic(bin, bin+prevSuffix); err != nil {
					_ = os.Remove(tmp)
					return details, fmt.Errorf("keep previous binary: %w", err)
				}
			}
			if err := r.mark(ctx, StepBackedUp, map[string]string{"prevSHA256": cur}); err != nil {
				return details, err
			}
		}
		if err := os.Rename(tmp, bin); err != nil {
			_ = os.Remove(tmp)
			return details, fmt.Errorf("install %s: %w", bin, err)
		}
		if err := syncDir(filepath.Dir(bin)); err != nil {
			return details, err
		}
		if err := r.mark(ctx, StepRenamed, nil); err != nil {
			return details, err
		}
	} else if !r.done(StepBackedUp) {
		// Already installed before this operation: nothing to replace,
		// and a healthy component needs no restart.
		details["note"] = "binary already at the requested sha256"
		if hl := r.componentHealth(ctx, u.Component); hl.Healthy {
			details["runningVersion"] = hl.Version
			return details, r.mark(ctx, StepHealthy, nil)
		}
	}
	if !r.done(StepRestarted) {
		if err := a.restartUnit(ctx, unit); err != nil {
			a.log.Warn("restart after upgrade failed", "unit", unit, "err", err)
			return details, r.failAndRestore(ctx, bin, unit, err)
		}
		if err := r.mark(ctx, StepRestarted, nil); err != nil {
			return details, err
		}
	}
	ver, err := a.waitHealthy(ctx, u.Component, a.cfg.HealthTimeout)
	if err != nil {
		return details, r.failAndRestore(ctx, bin, unit, err)
	}
	details["runningVersion"] = ver
	return details, r.mark(ctx, StepHealthy, nil)
}

// failAndRestore journals that the upgrade failed and restores the
// previous binary. The returned error says both.
func (r *run) failAndRestore(ctx context.Context, bin, unit string, cause error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := r.mark(ctx, StepRestoring, map[string]string{"cause": cause.Error()}); err != nil {
		return err
	}
	return r.restoreBinary(ctx, bin, unit, cause.Error())
}

// restoreBinary puts the backup back (if the upgrade got that far),
// restarts the unit and waits for health. Idempotent.
func (r *run) restoreBinary(ctx context.Context, bin, unit, cause string) error {
	a := r.a
	prevSHA := r.st.Data["prevSHA256"]
	if r.done(StepBackedUp) && prevSHA != "" {
		cur, err := fileSHA256(bin)
		if err != nil {
			return err
		}
		if cur != prevSHA {
			if err := copyFileAtomic(bin+prevSuffix, bin); err != nil {
				return fmt.Errorf("%w: %s; restoring the previous binary failed: %w", ErrUnhealthy, cause, err)
			}
		}
		if err := a.restartUnit(ctx, unit); err != nil {
			return fmt.Errorf("%w: %s; previous binary restored but restart failed: %w", ErrUnhealthy, cause, err)
		}
		if _, err := a.waitHealthy(ctx, r.op.UpgradeBinary.Component, a.cfg.HealthTimeout); err != nil {
			return fmt.Errorf("%w: %s; previous binary restored but still unhealthy: %w", ErrUnhealthy, cause, err)
		}
	}
	if err := r.mark(ctx, StepRestored, nil); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s; previous binary restored", ErrUnhealthy, cause)
}

func (r *run) componentHealth(ctx context.Context, c api.Component) api.ComponentHealth {
	if c == api.ComponentContainerd {
		return r.a.containerdHealth(ctx)
	}
	return r.a.kubeletHealth(ctx)
}

func (a *Agent) restartUnit(ctx context.Context, unit string) error {
	if a.cfg.Units == nil {
		return ErrNoUnits
	}
	rctx, cancel := context.WithTimeout(ctx, a.cfg.HealthTimeout)
	defer cancel()
	return a.cfg.Units.RestartUnit(rctx, unit)
}

// waitHealthy polls the component's health until it is healthy or
// timeout passes, and returns the version it reports.
func (a *Agent) waitHealthy(ctx context.Context, c api.Component, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last api.ComponentHealth
	for {
		if c == api.ComponentContainerd {
			last = a.containerdHealth(ctx)
		} else {
			last = a.kubeletHealth(ctx)
		}
		if last.Healthy {
			return last.Version, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w: %s after %s: %s", ErrUnhealthy, c, timeout, last.Message)
		case <-time.After(200 * time.Millisecond): // a probe interval, not synchronisation
		}
	}
}
