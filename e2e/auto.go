package e2e

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/moltproject/molt/api"
)

// Automatic upgrades on the lab (SPEC §14): the scenario the end-to-end
// test and `molt-lab demo --auto` share. Nobody starts the upgrade: the
// release channel's auto-upgrade target is set while the cluster's
// maintenance window is closed, the window is opened by a policy update,
// and the coordinator's scheduler starts the upgrade by itself.

// AutoOptions say what RunAutomatic does.
type AutoOptions struct {
	// To is the channel's auto-upgrade target.
	To string
	// PauseAt, when set, names a node: when it starts, the window is
	// closed (a policy update); once the upgrade has paused at a safe
	// point and stayed paused for PauseHold, the window is opened again.
	PauseAt   string
	PauseHold time.Duration
}

// AutoReport is what RunAutomatic saw.
type AutoReport struct {
	// Waiting is the cluster's upgrade status while the window was closed;
	// Plan the dry run of the automatic upgrade then.
	Waiting api.UpgradeStatus
	Plan    api.Plan
	// StartedAfter is the time from opening the window to the upgrade
	// being there; Started the upgrade as first seen.
	StartedAfter time.Duration
	Started      *api.Upgrade
	// Paused is the upgrade once paused at the window's end, PausedStatus
	// the status then (PauseAt only).
	Paused       *api.Upgrade
	PausedStatus api.UpgradeStatus
	// Upgrade is the finished upgrade, Done the status afterwards, Took
	// the time from opening the window to status.version.
	Upgrade *api.Upgrade
	Done    api.UpgradeStatus
	Took    time.Duration
}

// dailyWindow is a maintenance policy with a daily 6-hour window that
// starts at from's time of day.
func dailyWindow(from time.Time) api.MaintenancePolicy {
	s := from.UTC().Truncate(time.Second)
	return api.MaintenancePolicy{Window: &api.MaintenanceWindow{Start: s, End: s.Add(6 * time.Hour), Recurrence: "FREQ=DAILY"}}
}

// SetWindow stores a policy whose daily window is open now (started an
// hour ago) or closed (opens in three hours).
func (e *Env) SetWindow(ctx context.Context, open bool) error {
	from := time.Now().Add(3 * time.Hour)
	if open {
		from = time.Now().Add(-time.Hour)
	}
	_, err := e.API().Do(ctx, http.MethodPut, "/v1/clusters/"+ClusterName+"/maintenance-policy", dailyWindow(from), nil)
	return err
}

// UpgradeStatus asks why the cluster is (not) upgrading.
func (e *Env) UpgradeStatus(ctx context.Context) (api.UpgradeStatus, error) {
	var st api.UpgradeStatus
	_, err := e.API().Do(ctx, http.MethodGet, "/v1/clusters/"+ClusterName+"/upgrade-status", nil, &st)
	return st, err
}

// waitStatus polls the upgrade status until ok accepts it.
func (e *Env) waitStatus(ctx context.Context, timeout time.Duration, ok func(api.UpgradeStatus) bool) (api.UpgradeStatus, error) {
	var st api.UpgradeStatus
	err := poll(ctx, timeout, func() (bool, error) {
		var err error
		st, err = e.UpgradeStatus(ctx)
		return err == nil && ok(st), nil
	})
	if err != nil {
		return st, fmt.Errorf("upgrade status %s (%s): %w", st.State, st.Message, err)
	}
	return st, nil
}

func (e *Env) printStatus(st api.UpgradeStatus) {
	fmt.Fprintf(e.cfg.Out, "    why: %s — %s\n", st.State, st.Message)
	if !st.NextOpportunity.IsZero() {
		fmt.Fprintf(e.cfg.Out, "    next opportunity: %s\n", st.NextOpportunity.UTC().Format(time.RFC3339))
	}
}

// RunAutomatic sets the channel's target while the window is closed,
// opens the window, and follows the upgrade the scheduler starts by
// itself to its end (closing and reopening the window mid-way when
// PauseAt is set).
func (e *Env) RunAutomatic(ctx context.Context, o AutoOptions) (AutoReport, error) {
	var rep AutoReport
	out := e.cfg.Out
	e.step("maintenance window closed (a daily window that opens in 3 h); channel regular's auto-upgrade target → %s", o.To)
	// The cluster was registered without a policy, so it is held from
	// automatic upgrades (the registration hold); storing this one ends
	// the hold before the target is set, and the window rules from then.
	if err := e.SetWindow(ctx, false); err != nil {
		return rep, err
	}
	if _, err := e.API().Do(ctx, http.MethodPut, "/v1/channels/regular", api.ChannelUpdate{AutoUpgradeTarget: o.To}, nil); err != nil {
		return rep, fmt.Errorf("channel regular: %w", err)
	}
	var err error
	rep.Waiting, err = e.waitStatus(ctx, time.Minute, func(st api.UpgradeStatus) bool { return st.State == api.AutoWaitingForWindow })
	if err != nil {
		return rep, err
	}
	e.printStatus(rep.Waiting)
	if _, err := e.API().Do(ctx, http.MethodPost, "/v1/clusters/"+ClusterName+"/upgrade",
		api.UpgradeRequest{Version: o.To, Automatic: true, DryRun: true}, &rep.Plan); err != nil {
		return rep, fmt.Errorf("dry run: %w", err)
	}
	fmt.Fprintf(out, "    dry run: waits for the window until %s, expected to finish %s\n",
		firstWaitEnd(rep.Plan).UTC().Format(time.RFC3339), rep.Plan.End.UTC().Format(time.RFC3339))

	e.step("opening the window (a policy update); nobody starts the upgrade")
	opened := time.Now()
	if err := e.SetWindow(ctx, true); err != nil {
		return rep, err
	}
	err = poll(ctx, 2*time.Minute, func() (bool, error) {
		u, err := e.Upgrade(ctx)
		if err != nil || u.To != o.To || !u.Options.Automatic {
			return false, nil
		}
		rep.Started = u
		return true, nil
	})
	if err != nil {
		return rep, fmt.Errorf("no automatic upgrade to %s started: %w", o.To, err)
	}
	rep.StartedAfter = time.Since(opened)
	st, _ := e.UpgradeStatus(ctx)
	reason := ""
	if st.LastAttempt != nil {
		reason = st.LastAttempt.Reason
	}
	e.step("the scheduler started %s by itself %s after the window opened: %s", rep.Started.ID, rep.StartedAfter.Round(100*time.Millisecond), reason)

	if o.PauseAt != "" {
		if err := e.pauseAndResume(ctx, &rep, o); err != nil {
			return rep, err
		}
	}
	rep.Upgrade, err = e.Watch(ctx, rep.Started.ID, 45*time.Minute, nil)
	if err != nil {
		return rep, err
	}
	if err := e.WaitVersion(ctx, o.To, time.Minute); err != nil {
		return rep, err
	}
	rep.Took = time.Since(opened)
	rep.Done, err = e.waitStatus(ctx, time.Minute, func(st api.UpgradeStatus) bool {
		return st.State == api.AutoUpToDate && st.LastAttempt != nil && st.LastAttempt.Outcome == "done"
	})
	if err != nil {
		return rep, err
	}
	e.printStatus(rep.Done)
	return rep, nil
}

// pauseAndResume closes the window when node o.PauseAt starts, waits for
// the upgrade to pause once what was in flight finished, checks that it
// stays paused for o.PauseHold, and opens the window again.
func (e *Env) pauseAndResume(ctx context.Context, rep *AutoReport, o AutoOptions) error {
	p := newProgress(e.cfg.Out)
	id := rep.Started.ID
	err := poll(ctx, 30*time.Minute, func() (bool, error) {
		u, err := e.Upgrade(ctx)
		if err != nil || u.ID != id {
			return false, nil
		}
		p.show(u)
		n, ok := u.Node(o.PauseAt)
		return ok && n.State != api.StepPending, nil
	})
	if err != nil {
		return fmt.Errorf("node %s never started: %w", o.PauseAt, err)
	}
	e.step("%s started: closing the window (a policy update)", o.PauseAt)
	if err := e.SetWindow(ctx, false); err != nil {
		return err
	}
	err = poll(ctx, 15*time.Minute, func() (bool, error) {
		u, err := e.Upgrade(ctx)
		if err != nil || u.ID != id {
			return false, nil
		}
		p.show(u)
		if !u.InProgress {
			return false, fmt.Errorf("upgrade %s ended %s before it paused", id, u.State)
		}
		rep.Paused = u
		return u.PauseReason != "" && countState(u, api.StepRunning) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("no pause at the window's end: %w", err)
	}
	rep.PausedStatus, err = e.UpgradeStatus(ctx)
	if err != nil {
		return err
	}
	e.step("paused at a safe point (%s): %d node(s) done, %d waiting for the window", rep.Paused.PauseReason,
		countState(rep.Paused, api.StepDone), countState(rep.Paused, api.StepPending))
	e.printStatus(rep.PausedStatus)
	// Nothing new starts while the window is closed.
	held := time.Now()
	err = poll(ctx, o.PauseHold+time.Minute, func() (bool, error) {
		u, err := e.Upgrade(ctx)
		if err != nil {
			return false, nil
		}
		if countState(u, api.StepPending) < countState(rep.Paused, api.StepPending) || u.PauseReason == "" {
			return false, fmt.Errorf("work started while the window was closed")
		}
		return time.Since(held) >= o.PauseHold, nil
	})
	if err != nil {
		return err
	}
	e.step("reopening the window (a policy update)")
	return e.SetWindow(ctx, true)
}

func countState(u *api.Upgrade, st api.StepState) int {
	n := 0
	for _, t := range u.Nodes {
		if t.State == st {
			n++
		}
	}
	return n
}

func firstWaitEnd(p api.Plan) time.Time {
	if len(p.Waits) == 0 {
		return time.Time{}
	}
	return p.Waits[0].End
}
