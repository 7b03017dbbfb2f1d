package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
)

// Preflight runs the preflight checks for an upgrade to version and waits
// for the report.
func (e *Env) Preflight(ctx context.Context, version string) (api.PreflightRun, error) {
	var run api.PreflightRun
	if _, err := e.API().Do(ctx, http.MethodPost, "/v1/clusters/"+ClusterName+"/preflight", map[string]string{"version": version}, &run); err != nil {
		return run, err
	}
	return e.waitPreflight(ctx, run.ID)
}

// waitPreflight waits for preflight run id's report.
func (e *Env) waitPreflight(ctx context.Context, id string) (api.PreflightRun, error) {
	var run api.PreflightRun
	err := poll(ctx, 3*time.Minute, func() (bool, error) {
		if _, err := e.API().Do(ctx, http.MethodGet, "/v1/clusters/"+ClusterName+"/preflight/"+id, nil, &run); err != nil {
			return false, nil
		}
		return run.Report != nil, nil
	})
	return run, err
}

// PrintReport writes a preflight report, one line per check.
func (e *Env) PrintReport(run api.PreflightRun) {
	if run.Report == nil {
		return
	}
	for _, r := range run.Report.Results {
		mark := "ok  "
		switch {
		case r.Blocks:
			mark = "FAIL"
		case r.Status != "pass":
			mark = "warn"
		}
		fmt.Fprintf(e.cfg.Out, "    %s %-24s %s\n", mark, r.Check, r.Message)
	}
	fmt.Fprintf(e.cfg.Out, "    verdict: %s\n", run.Report.Verdict)
}

// StartUpgrade asks for an upgrade to version (manual: not gated by
// maintenance windows). The coordinator answers at once with the upgrade
// in state preflight; its preflight run then moves it to running, or to
// refused with the blocking checks.
func (e *Env) StartUpgrade(ctx context.Context, version string) (*api.Upgrade, error) {
	var u api.Upgrade
	req := api.UpgradeRequest{Version: version, ConcurrentWorkerPools: e.cfg.ConcurrentWorkerPools}
	if _, err := e.API().Do(ctx, http.MethodPost, "/v1/clusters/"+ClusterName+"/upgrade", req, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// Upgrade reads the cluster's current (or last) upgrade as the API shows
// it: the tests follow its steps and nodes, and the coordinator's reading
// of them, off the wire, as moltctl does.
func (e *Env) Upgrade(ctx context.Context) (*api.Upgrade, error) {
	var u api.Upgrade
	if _, err := e.API().Do(ctx, http.MethodGet, "/v1/clusters/"+ClusterName+"/upgrade", nil, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// Watch follows upgrade id until it ends (leaves preflight and running), printing every change
// of a step or a node and calling observe (when set) with each revision it
// sees, so a test can inject faults at chosen moments. Reads go to any
// running member; a member that does not answer is simply skipped. A
// member serves reads from the state it has applied, which may trail the
// leader's (by a heartbeat, or longer right after a restart): until it
// shows upgrade id, what it shows is the previous upgrade and is ignored,
// or a watch started right after StartUpgrade would end at once on the
// last upgrade's "done".
func (e *Env) Watch(ctx context.Context, id string, timeout time.Duration, observe func(*api.Upgrade)) (*api.Upgrade, error) {
	p := newProgress(e.cfg.Out)
	var last *api.Upgrade
	err := poll(ctx, timeout, func() (bool, error) {
		u, err := e.Upgrade(ctx)
		if err != nil || u.ID != id {
			return false, nil
		}
		last = u
		p.show(u)
		if observe != nil {
			observe(u)
		}
		// A failed node halts its pool until an operator retries it
		// (POST .../nodes/{node}/retry): stop watching and say so.
		for _, n := range u.Nodes {
			if n.State == api.StepFailed {
				return false, fmt.Errorf("node %s failed: %s (after fixing the cause: moltctl node retry %s %s)", n.Node, n.Error, ClusterName, n.Node)
			}
		}
		return !u.InProgress, nil
	})
	if err != nil {
		return last, fmt.Errorf("upgrade did not finish in %s: %w", timeout, err)
	}
	if last.State == api.UpgradeRefused {
		return last, fmt.Errorf("upgrade %s refused by preflight %s: %s", last.ID, last.Preflight, strings.Join(last.RefusedChecks, ", "))
	}
	if last.State != api.UpgradeDone {
		return last, fmt.Errorf("upgrade %s ended %s", last.ID, last.State)
	}
	return last, nil
}

// WaitVersion waits until the cluster's status.version is v: set only when
// every component was upgraded and the final health checks passed.
func (e *Env) WaitVersion(ctx context.Context, v string, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		c, err := e.Cluster(ctx)
		return err == nil && c.Status.Version == v, nil
	})
}

// RunUpgrade is an operator's upgrade: preflight (report printed; a
// blocking failure stops here), start, watch until done, and wait for
// status.version to reach the target. It returns the finished upgrade and
// the time from start to status.version.
func (e *Env) RunUpgrade(ctx context.Context, to string) (*api.Upgrade, time.Duration, error) {
	out := e.cfg.Out
	t0 := time.Now()
	started, err := e.StartUpgrade(ctx, to)
	if err != nil {
		return nil, 0, err
	}
	fmt.Fprintf(out, "==> upgrade %s v%s → v%s accepted; its preflight %s runs first\n", started.ID, started.From, to, started.Preflight)
	run, err := e.waitPreflight(ctx, started.Preflight)
	if err != nil {
		return nil, 0, err
	}
	e.PrintReport(run)
	if len(run.Report.Failed) > 0 {
		return nil, 0, fmt.Errorf("upgrade %s refused by preflight %s: %s", started.ID, run.ID, strings.Join(run.Report.Failed, ", "))
	}
	fmt.Fprintf(out, "==> upgrade %s v%s → v%s (control-plane LB, control plane, add-ons, LB nodes, workers)\n", ClusterName, started.From, to)
	u, err := e.Watch(ctx, started.ID, 45*time.Minute, nil)
	if err != nil {
		return u, 0, err
	}
	if err := e.WaitVersion(ctx, to, time.Minute); err != nil {
		return u, 0, fmt.Errorf("status.version never became %s: %w", to, err)
	}
	return u, time.Since(t0), nil
}
