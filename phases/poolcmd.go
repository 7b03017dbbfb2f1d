package phases

import (
	"errors"
	"fmt"
	"time"
)

// Pool commands (SPEC §7): POST .../pools/{p}/upgrade:{command}.
const (
	PoolCancel   = "cancel"
	PoolResume   = "resume"
	PoolRollback = "rollback"
	PoolComplete = "complete"
)

// ErrCommandRefused is wrapped by every CommandError.
var ErrCommandRefused = errors.New("pool command not allowed")

// CommandError refuses a pool command that is not allowed where the pool
// is, naming the rule (e.g. rollback-after-done, complete-outside-soak,
// cancel-during-delete).
type CommandError struct {
	Rule   string
	Detail string
}

func (e *CommandError) Error() string { return e.Rule + ": " + e.Detail }

// Unwrap ties every refusal to ErrCommandRefused.
func (e *CommandError) Unwrap() error { return ErrCommandRefused }

func refuse(rule, format string, args ...any) error {
	return &CommandError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// PoolCommand runs an operator's command on a pool of u, or refuses it
// with the rule it breaks and changes nothing.
//
//   - cancel: nothing new starts in the pool; nodes already started
//     finish, and the step then halts as cancelled. A blue/green pool
//     pauses in its phase; DELETING_BLUE_POOL cannot be paused. Once
//     nothing else can run the upgrade is cancelled: no longer blocking.
//   - resume: a cancelled pool goes on; a cancelled upgrade runs again,
//     unless the cluster's shape changed since (Closed).
//   - rollback: a surge pool takes every node it touched back to the old
//     version; a blue/green pool uncordons blue and deletes green. Not
//     once the pool finished, nor while blue is being deleted. A
//     bare-metal pool (upgrades laid out at StepLayoutGates on) takes
//     every node it upgraded or touched back, in the reverse order, once
//     the upgrade failed or was cancelled, unless its policy is never; a
//     control-plane pool only while no other node runs the new version.
//     A failed upgrade accepts rollback only.
//   - complete: a soaking blue/green pool ends its soak now.
func (u *Upgrade) PoolCommand(pool, cmd string, now time.Time) error {
	p, ok := u.Pool(pool)
	if !ok {
		return refuse("pool-unknown", "upgrade %s has no pool %s", u.ID, pool)
	}
	s, _ := u.Step(PoolStepID(pool))
	switch u.State {
	case UpgradeRunning:
	case UpgradeCancelled:
		if cmd != PoolResume && cmd != PoolRollback {
			return refuse("upgrade-cancelled", "upgrade %s is cancelled; resume or roll back one of its pools", u.ID)
		}
		if u.Closed {
			return refuse("resume-after-change", "the cluster changed after upgrade %s was cancelled; start a new upgrade", u.ID)
		}
	case UpgradeFailed:
		if cmd != PoolRollback || u.Options.StepLayout < StepLayoutGates {
			return refuse("upgrade-failed", "upgrade %s failed (%s); a pool of it may be rolled back", u.ID, u.Reason)
		}
		if u.Closed {
			return refuse("resume-after-change", "the cluster changed after upgrade %s failed; start a new upgrade", u.ID)
		}
	default:
		return refuse("upgrade-finished", "upgrade %s is %s", u.ID, u.State)
	}
	if u.Options.StepLayout < StepLayoutMIG {
		return u.legacyPoolCommand(p, cmd)
	}
	bg := p.BlueGreen
	switch cmd {
	case PoolCancel:
		switch {
		case s.State == StateDone, bg != nil && bg.Phase == PhaseCompleted:
			return refuse("cancel-after-done", "pool %s finished its upgrade", pool)
		case s.State == StateRolledBack:
			return refuse("cancel-after-rollback", "pool %s was rolled back", pool)
		case p.Cancelled:
			return refuse("already-cancelled", "pool %s is already cancelled", pool)
		case p.RollingBack, bg != nil && bg.Phase == PhaseRollbackStarted:
			return refuse("cancel-during-rollback", "pool %s is rolling back; a rollback is not paused", pool)
		case bg != nil && bg.Phase == PhaseDeletingBlue:
			return refuse("cancel-during-delete", "pool %s is deleting its blue groups, which cannot be paused", pool)
		}
		p.Cancelled = true
		if s.State == StatePending {
			s.State, s.FinishedAt = StateCancelled, now
		}
	case PoolResume:
		if !p.Cancelled {
			return refuse("not-cancelled", "pool %s is not cancelled", pool)
		}
		p.Cancelled = false
		u.reopen(s)
	case PoolRollback:
		if p.RollbackPolicy == RollbackNever {
			return refuse("rollback-never", "pool %s's rollback policy is never", pool)
		}
		if p.Strategy == "" {
			return u.rollbackInPlacePool(p, s)
		}
		switch {
		case s.State == StateDone, bg != nil && bg.Phase == PhaseCompleted:
			return refuse("rollback-after-done", "pool %s finished its upgrade; a rollback is possible only before", pool)
		case s.State == StateRolledBack, p.RollingBack, bg != nil && (bg.Phase == PhaseRollbackStarted || bg.Phase == PhaseRolledBack):
			return refuse("already-rolling-back", "pool %s is rolled back or rolling back", pool)
		case s.State == StatePending || s.State == StateCancelled && s.StartedAt.IsZero():
			return refuse("rollback-before-start", "pool %s has not started; nothing to roll back", pool)
		case bg != nil && bg.Phase == PhaseDeletingBlue:
			return refuse("rollback-during-delete", "pool %s is deleting its blue groups; it can no longer roll back", pool)
		}
		p.Cancelled = false
		if bg != nil {
			bg.RollbackFrom = bg.Phase
			bg.enter(PhaseRollbackStarted, now)
			nodes := u.PoolNodes(p)
			for i := range nodes {
				// Drains stop: results still in flight are stale.
				if n := &nodes[i]; n.State == StateRunning {
					n.State, n.Attempt = StatePending, n.Attempt+1
				}
			}
		} else {
			p.RollingBack = true
		}
		u.reopen(s)
	case PoolComplete:
		switch {
		case bg == nil:
			return refuse("complete-blue-green-only", "pool %s is not upgraded blue/green; complete ends a blue/green soak", pool)
		case bg.Phase != PhaseSoaking:
			return refuse("complete-outside-soak", "pool %s is %s; complete applies in %s only", pool, bg.Phase, PhaseSoaking)
		case bg.Completed:
			return refuse("already-completed", "pool %s is already completing its soak", pool)
		case p.Cancelled:
			return refuse("complete-while-cancelled", "pool %s is cancelled; resume it first", pool)
		}
		bg.Completed = true
	default:
		return refuse("pool-command", "unknown command %q (cancel, resume, rollback, complete)", cmd)
	}
	u.Revision++
	return nil
}

// reopen runs a halted pool step, and a cancelled (or failed) upgrade,
// again.
func (u *Upgrade) reopen(s *Step) {
	switch s.State {
	case StateCancelled, StateFailed, StateDone:
		if s.StartedAt.IsZero() {
			s.State = StatePending
		} else {
			s.State = StateRunning
		}
		s.FinishedAt = time.Time{}
	}
	if u.State == UpgradeCancelled || u.State == UpgradeFailed {
		u.State, u.FinishedAt = UpgradeRunning, time.Time{}
	}
}

// rollbackInPlacePool starts the rollback of a bare-metal pool (SPEC
// §16): once its upgrade failed or was cancelled, every node it upgraded
// or touched goes back to the version before, in reverse order, within
// the pool's budget. The version rules hold: a control-plane pool goes
// back only while no other pool's node runs the new version (kubelets
// never newer than the control plane).
func (u *Upgrade) rollbackInPlacePool(p *PoolTrack, s *Step) error {
	switch {
	case p.RollbackSteps == nil:
		return refuse("rollback-bare-metal", "pool %s was laid out before bare-metal rollback (layout %d); it cannot be rolled back", p.Name, u.Options.StepLayout)
	case u.State == UpgradeRunning:
		return refuse("rollback-while-running", "a bare-metal pool rolls back once its upgrade failed or was cancelled; cancel pool %s first", p.Name)
	case s.State == StateRolledBack, p.RollingBack:
		return refuse("already-rolling-back", "pool %s is rolled back or rolling back", p.Name)
	case s.State == StatePending || s.StartedAt.IsZero():
		return refuse("rollback-before-start", "pool %s has not started; nothing to roll back", p.Name)
	}
	if err := u.rollbackSkew(p); err != nil {
		return err
	}
	p.Cancelled, p.RollingBack = false, true
	u.reopen(s)
	u.Revision++
	return nil
}

// legacyPoolCommand is what cancel and resume did to upgrades laid out
// before StepLayoutMIG, kept so their logs replay to the same state:
// they only set the pool's Cancelled flag.
func (u *Upgrade) legacyPoolCommand(p *PoolTrack, cmd string) error {
	switch cmd {
	case PoolCancel, PoolResume:
		if p.Cancelled == (cmd == PoolCancel) {
			return refuse("pool-"+cmd, "pool %s cancelled is already %v", p.Name, p.Cancelled)
		}
		p.Cancelled = cmd == PoolCancel
	case PoolRollback, PoolComplete:
		return refuse("pool-"+cmd, "%s applies to MIG pools of upgrades started since this release", cmd)
	default:
		return refuse("pool-command", "unknown command %q (cancel, resume, rollback, complete)", cmd)
	}
	u.Revision++
	return nil
}
