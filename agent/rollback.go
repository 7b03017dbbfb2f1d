package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/moltproject/molt/api"
)

// ErrRollbackUnavailable means the operation cannot be rolled back: it is
// unknown here, not an upgrade, or a later upgrade replaced the backup.
var ErrRollbackUnavailable = errors.New("rollback unavailable")

// rollback restores what a finished upgrade replaced: the previous binary
// (from <bin>.molt-prev, checked against the sum journaled at backup) or
// the manifest backup. Idempotent: a restore compares before writing.
func (r *run) rollback(ctx context.Context) (map[string]string, error) {
	a := r.a
	target := r.op.Rollback.OperationID
	st, ok := a.journal.get(target)
	if !ok || st.Result == nil {
		return nil, fmt.Errorf("%w: operation %s is not a finished operation of this host", ErrRollbackUnavailable, target)
	}
	details := map[string]string{"target": target}
	if !st.Steps[StepBackedUp] {
		// It replaced nothing (the component was already at its target,
		// or it failed before): the host is as it was before it.
		details["restored"] = "nothing: operation " + target + " changed nothing"
		return details, nil
	}
	switch st.Op.Kind {
	case api.OpUpgradeBinary:
		comp := st.Op.UpgradeBinary.Component
		bin, unit := a.binaryTarget(comp)
		prevSHA := st.Data["prevSHA256"]
		if prevSHA == "" {
			return details, fmt.Errorf("%w: %s had no previous binary", ErrRollbackUnavailable, bin)
		}
		cur, err := fileSHA256(bin)
		if err != nil {
			return details, err
		}
		if cur != prevSHA {
			got, err := fileSHA256(bin + prevSuffix)
			if err != nil {
				return details, err
			}
			if got != prevSHA {
				return details, fmt.Errorf("%w: %s%s no longer holds the binary operation %s replaced", ErrRollbackUnavailable, bin, prevSuffix, target)
			}
			if err := copyFileAtomic(bin+prevSuffix, bin); err != nil {
				return details, fmt.Errorf("restore %s: %w", bin, err)
			}
		}
		if err := r.mark(ctx, StepRestored, nil); err != nil {
			return details, err
		}
		if !r.done(StepRestarted) {
			if err := a.restartUnit(ctx, unit); err != nil {
				return details, err
			}
			if err := r.mark(ctx, StepRestarted, nil); err != nil {
				return details, err
			}
		}
		ver, err := a.waitHealthy(ctx, comp, a.cfg.HealthTimeout)
		if err != nil {
			return details, err
		}
		details["runningVersion"] = ver
		return details, r.mark(ctx, StepHealthy, nil)
	case api.OpUpgradeStaticPods:
		backup := a.dataPath("backups", target)
		if _, err := os.Stat(backup); err != nil {
			return details, fmt.Errorf("%w: backup of %s: %w", ErrRollbackUnavailable, target, err)
		}
		keep := keptEtcdManifests(st)
		if err := restoreDir(backup, a.path(a.cfg.ManifestDir), keep...); err != nil {
			return details, fmt.Errorf("restore manifests: %w", err)
		}
		if len(keep) > 0 {
			details["kept"] = strings.Join(keep, ",") + ": etcd is not rolled back (docs/etcd.md)"
		}
		return details, r.mark(ctx, StepRestored, nil)
	default:
		return details, fmt.Errorf("%w: %s is a %s, not an upgrade", ErrRollbackUnavailable, target, st.Op.Kind)
	}
}
