package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
)

// startWork runs fn once per action ID at a time, under the leadership
// term that ctx belongs to (the context tick runs under): fn gets the
// term's context, and the term's end cancels it and waits for fn to
// return. When the term already runs MaxConcurrentWork items, fn does not
// start now; a later tick decides the same action again and starts it then.
// After a leader change the new leader starts the same IDs again; the work
// is idempotent.
func (l *leader) startWork(ctx context.Context, id string, fn func(context.Context)) {
	t := termOf(ctx)
	if t == nil {
		l.log.Error("work started outside a leadership term; not run", "id", id)
		return
	}
	t.start(id, fn)
}

// retry runs fn until it succeeds. A failure counts against WorkRetries,
// backing off longer after each; a failure because the API server is
// unavailable (ErrAPIUnavailable) does not: fn is repeated RetryBackoff
// apart until the API has been unavailable for APIUnavailableTimeout in a
// row. Upgrading a control-plane LB or an API server makes the API go away
// by itself for a while, and the step after it (the next node's drain)
// must wait for it rather than fail.
func (l *leader) retry(ctx context.Context, what string, fn func() error) error {
	limit := l.cfg.APIUnavailableTimeout
	var unavailableSince time.Time
	for failures := 0; ; {
		err := fn()
		if err == nil || ctx.Err() != nil {
			if err == nil && !unavailableSince.IsZero() {
				l.log.Info("API server available again", "what", what, "after", time.Since(unavailableSince).Round(time.Millisecond))
			}
			return err
		}
		wait := l.cfg.RetryBackoff
		if errors.Is(err, ErrAPIUnavailable) {
			if unavailableSince.IsZero() {
				unavailableSince = time.Now()
				l.log.Warn("API server unavailable; repeating the call until it answers", "what", what, "for_at_most", limit, "err", err)
			}
			if away := time.Since(unavailableSince); away >= limit {
				return fmt.Errorf("unavailable for %s (the API unavailable timeout): %w", away.Round(time.Second), err)
			}
		} else {
			unavailableSince = time.Time{}
			failures++
			l.log.Warn("cluster call failed", "what", what, "attempt", failures, "err", err)
			if failures > l.cfg.WorkRetries {
				return err
			}
			wait *= time.Duration(failures)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// runNodeStep performs a node step that goes through the API server and
// commits its outcome.
func (l *leader) runNodeStep(ctx context.Context, p tickPlan, a phases.Action) {
	log := l.log.With("cluster", p.cluster, "node", a.Node, "step", a.NodeStep.String(), "id", a.ID)
	// The machine the step acts on (a surge replacement once it replaced
	// the node) and the version it goes to (the From of a rollback).
	live, target := a.Node, p.upgrade.To
	if n, ok := p.upgrade.Node(a.Node); ok {
		live, target = n.Live(), p.upgrade.TargetOf(n)
	}
	ops, err := l.clusterOps(p.cluster, p.kubeconfig)
	if a.NodeStep.Kind == phases.NodeGates {
		l.runGates(ctx, p, a, ops, err)
		return
	}
	var drained Drained
	var wait string
	if err == nil {
		switch a.NodeStep.Kind {
		case phases.NodeCordon:
			err = l.retry(ctx, "cordon", func() error { return ops.Cordon(ctx, live) })
		case phases.NodeDrain:
			start := time.Now()
			err = l.retry(ctx, "drain", func() (e error) { drained, e = ops.Drain(ctx, live, drainOptions(p.upgrade, a.Pool)); return e })
			if err == nil {
				l.observeDrain(p.cluster, a.Pool, time.Since(start), drained.Left)
			}
		case phases.NodeWaitReady:
			if pool, ok := p.upgrade.Pool(a.Pool); ok && pool.Backing == phases.BackingMIG {
				err = l.waitInstanceReady(ctx, ops, p.cluster, live, target) // recreated in place: its agent too
			} else {
				err = l.waitReady(ctx, ops, live, target)
			}
			if pool, ok := p.upgrade.Pool(a.Pool); err == nil && ok && serves(pool.Role) {
				err = l.waitServing(ctx, ops, live)
			}
		case phases.NodeUncordon:
			err = l.retry(ctx, "uncordon", func() error { return ops.Uncordon(ctx, live) })
		default:
			wait, err = l.migNodeStep(ctx, p, a, ops)
		}
	}
	if ctx.Err() != nil {
		return // leadership lost: the next leader redoes this step
	}
	switch {
	case err != nil:
		log.Warn("node step failed", "err", err)
	case wait != "":
		log.Info("node step waits", "reason", wait)
		l.commitNode(ctx, p.cluster, phases.NodeStepResult{Upgrade: a.Upgrade, Node: a.Node, Cursor: a.Cursor, Attempt: a.Attempt,
			Wait: wait, RetryAt: l.cloudRetryAt(), Message: wait}, a.ID)
		return
	default:
		log.Info("node step done", "left_behind", len(drained.Left), "workloads", len(drained.Workloads))
	}
	r := phases.NodeStepResult{Upgrade: a.Upgrade, Node: a.Node, Cursor: a.Cursor, Attempt: a.Attempt, OK: err == nil,
		LeftBehind: drained.Left, Drained: drained.Workloads}
	if err != nil {
		r.Message = err.Error()
	}
	l.commitNode(ctx, p.cluster, r, a.ID)
}

// serves says whether a pool of role carries traffic for others (the API
// server's, the Services'): its node is done only once it serves again.
func serves(r phases.Role) bool {
	return r == phases.RoleControlPlaneLB || r == phases.RoleLoadBalancer
}

// waitServing waits, within WaitReadyTimeout, until an LB node serves:
// the static pods it runs (the LB) Ready, as the API server reports them.
// A Node is Ready as soon as its kubelet is back, while the LB the kubelet
// runs may still be coming back (its pod recreated after the kubelet and
// containerd changed); calling the LB node done then made the next node's
// first call find the API unreachable. An LB that goes away again after
// this reading is covered by APIUnavailableTimeout.
func (l *leader) waitServing(ctx context.Context, ops ClusterOps, node string) error {
	wctx, cancel := context.WithTimeout(ctx, l.cfg.WaitReadyTimeout)
	defer cancel()
	return ops.WaitServing(wctx, node)
}

func (l *leader) commitNodeResult(ctx context.Context, cluster string, a phases.Action, err error, msg string, left []phases.LeftPod) {
	r := phases.NodeStepResult{Upgrade: a.Upgrade, Node: a.Node, Cursor: a.Cursor, Attempt: a.Attempt, OK: err == nil, Message: msg, LeftBehind: left}
	if err != nil {
		r.Message = err.Error()
	}
	l.commitNode(ctx, cluster, r, a.ID)
}

// commitNode commits a node step's result: done, failed, or waiting for a
// reason that passes (tried again at its RetryAt).
func (l *leader) commitNode(ctx context.Context, cluster string, r phases.NodeStepResult, id string) {
	v, err := l.apply(ctx, statemachine.NodeStepResultCmd{Cluster: cluster, Result: r, Now: l.cfg.Clock.Now()})
	if err != nil && !isStale(err) {
		l.log.Warn("commit node step result", "cluster", cluster, "id", id, "err", err)
	}
	l.observeNode(cluster, v)
}

// observeDrain records a drain's duration and the pods it left behind.
func (l *leader) observeDrain(cluster, pool string, d time.Duration, left []phases.LeftPod) {
	if l.cfg.Recorder == nil {
		return
	}
	reasons := map[string]int{}
	timedOut := false
	for _, l := range left {
		reasons[l.Reason]++
		timedOut = timedOut || l.Reason != "protected"
	}
	l.cfg.Recorder.Drained(cluster, pool, d, timedOut, reasons)
}

// runStep performs a cluster-level step (add-ons, health; lifecycle only in
// upgrades laid out before phases.StepLayoutNoLifecycle).
func (l *leader) runStep(ctx context.Context, p tickPlan, a phases.Action) {
	ops, err := l.clusterOps(p.cluster, p.kubeconfig)
	if err == nil {
		switch a.Step {
		case phases.StepIDAddons:
			err = l.applyAddons(ctx, ops, p)
		case phases.StepIDHealth:
			// The nodes as they are now: a MIG pool's replacements and
			// green nodes, not the instances they replaced.
			err = ops.Health(ctx, p.upgrade.To, p.upgrade.LiveNodes())
		}
	}
	if ctx.Err() != nil {
		return
	}
	res := phases.StepResult{Upgrade: a.Upgrade, Step: a.Step, Attempt: a.Attempt, OK: err == nil, Message: "passed"}
	if a.Step == phases.StepIDLifecycle {
		// An upgrade an older release laid out; no release carries
		// lifecycle-controller manifests, so there is nothing to do.
		res.Message = "nothing to apply: no release carries lifecycle-controller manifests"
	}
	if err != nil {
		res.Message = err.Error()
		l.log.Warn("step attempt failed; retried", "cluster", p.cluster, "step", a.Step, "err", err)
	}
	if _, err := l.apply(ctx, statemachine.StepResultCmd{Cluster: p.cluster, Result: res, Now: l.cfg.Clock.Now()}); err != nil && !isStale(err) {
		l.log.Warn("commit step result", "cluster", p.cluster, "step", a.Step, "err", err)
	}
}

// applyAddons applies the target release's add-ons from the catalog entry
// the tick read (p.release) and waits for them to roll out, all within
// AddonRolloutTimeout: failed API calls are retried inside that deadline,
// and a rollout still unfinished at it fails this attempt of the step with
// the objects and counts that were not done. The step's own retries
// (phases) make the next attempt.
func (l *leader) applyAddons(ctx context.Context, ops ClusterOps, p tickPlan) error {
	var addons []api.AddonManifest
	if p.release != nil {
		addons = p.release.Components.Addons
	}
	wctx, cancel := context.WithTimeout(ctx, l.cfg.AddonRolloutTimeout)
	defer cancel()
	return l.retry(wctx, "addons", func() error { return ops.ApplyAddons(wctx, p.upgrade.To, addons) })
}

// startProtectedPool starts an automatic upgrade's pool step together with
// the protections of its nodes (SPEC §8): it asks the cluster which nodes
// hold pods protected from eviction and until when, and commits both in one
// advance, so such nodes go last and not before. A node it cannot read
// leaves the step unstarted: the next tick decides the start again and this
// runs again, rather than a protected pod being evicted.
func (l *leader) startProtectedPool(ctx context.Context, p tickPlan, a phases.Action) {
	ops, err := l.clusterOps(p.cluster, p.kubeconfig)
	if err != nil {
		l.log.Warn("pool start waits: no access to the cluster to read protected pods", "cluster", p.cluster, "step", a.Step, "err", err)
		return
	}
	// p.upgrade is the tick's copy: the pool's nodes as decided on.
	var nodes []string
	s, _ := p.upgrade.Step(a.Step)
	pool, _ := p.upgrade.Pool(s.Pool)
	for _, n := range p.upgrade.PoolNodes(pool) {
		nodes = append(nodes, n.Node)
	}
	now := l.cfg.Clock.Now()
	protect := map[string]time.Time{}
	for _, node := range nodes {
		info, err := ops.ProtectedUntil(ctx, node, now)
		if err != nil {
			l.log.Warn("pool start waits: read protected pods", "cluster", p.cluster, "node", node, "err", err)
			return
		}
		if info.Pods > 0 {
			protect[node] = info.Until
		}
	}
	_, err = l.apply(ctx, statemachine.AdvanceCmd{Cluster: p.cluster, Upgrade: p.upgrade.ID, Actions: []phases.Action{a}, Now: now, Protections: protect})
	if err != nil && !isStale(err) {
		l.log.Warn("commit pool start", "cluster", p.cluster, "step", a.Step, "err", err)
	}
}
