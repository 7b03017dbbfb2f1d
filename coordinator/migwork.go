package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
)

// The work of MIG pools (SPEC §7) through the cloud adapter and the
// cluster's API server. Every call names its instances deterministically
// (phases.ReplacementName, phases.GreenGroupName) and carries a request ID
// derived from the action ID (cloud.RequestID): a new leader that repeats
// a step after a failover makes the same calls, and the provider creates
// or deletes nothing twice. A missing quota or capacity makes the step
// wait, with its reason in the node's or pool's status, not fail.

// migNodeStep performs a MIG node step (surge, unavailable, undo paths).
// It returns a wait reason when the step could not run for a reason that
// passes.
func (l *leader) migNodeStep(ctx context.Context, p tickPlan, a phases.Action, ops ClusterOps) (string, error) {
	prov, err := l.cloudFor(p.cloud)
	if err != nil {
		return "", err
	}
	track, _ := p.upgrade.Pool(a.Pool)
	n, _ := p.upgrade.Node(a.Node)
	g := cloud.GroupRef{Zone: n.Zone, Name: track.GroupOf(n)}
	target := p.upgrade.TargetOf(n)
	req := reqOf(a.ID, n.RetryAt)
	switch a.NodeStep.Kind {
	case phases.NodeCreateReplacement:
		return l.createReplacement(ctx, prov, g, n.Live(), n.Replacement, target, req)
	case phases.NodeWaitReplacement:
		// The replacement, or — a spot pool waits at the end, after the
		// old instance was deleted and the replacement stands for the
		// node — the node's live instance.
		repl := n.Replacement
		if repl == "" {
			repl = n.Live()
		}
		return "", l.waitInstanceReady(ctx, ops, p.cluster, repl, target)
	case phases.NodeDeleteInstance:
		return "", l.deleteInstance(ctx, prov, ops, g, n.Live(), req("delete"))
	case phases.NodeRecreateInstance:
		return l.recreateInstance(ctx, prov, g, n.Live(), target, req)
	case phases.NodeUndoReplacement:
		if err := l.deleteInstance(ctx, prov, ops, g, n.Replacement, req("delete")); err != nil {
			return "", err
		}
		return "", l.retry(ctx, "uncordon", func() error { return ops.Uncordon(ctx, n.Live()) })
	}
	return "", fmt.Errorf("node step %s is not a MIG step", a.NodeStep.Kind)
}

// templateFor makes the template of release for a group, copying the
// template of base (an instance of the group) or, when base is gone, the
// group's: content-addressed, so the same call on any leader gives the
// same template; a base already at release is its own answer.
func templateFor(ctx context.Context, prov cloud.Provider, g cloud.GroupRef, base string, release phases.Version, req string) (string, error) {
	from := ""
	if insts, err := prov.ListInstances(ctx, g); err == nil {
		if in, ok := findInstance(insts, base); ok {
			from = in.Template
		}
	}
	if from == "" {
		grp, err := prov.GetGroup(ctx, g)
		if err != nil {
			return "", err
		}
		from = grp.Template
	}
	return prov.EnsureTemplate(ctx, cloud.TemplateSpec{Release: release.String(), Base: from}, req)
}

// createReplacement creates the surge replacement of live in g at release
// and waits until the instance runs. No quota or capacity is a wait; an
// instance the zone could not run is deleted, so none is left behind.
func (l *leader) createReplacement(ctx context.Context, prov cloud.Provider, g cloud.GroupRef, live, repl string, release phases.Version, req func(string) string) (string, error) {
	insts, err := prov.ListInstances(ctx, g)
	if err != nil {
		return "", err
	}
	if _, exists := findInstance(insts, repl); !exists {
		q, err := prov.Quota(ctx, g.Zone)
		if err != nil {
			return "", err
		}
		if q.Free() < 1 {
			return fmt.Sprintf("quota: %d of %d instances in use in %s; waiting for one", q.Usage, q.Limit, g.Zone), nil
		}
	}
	tmpl, err := templateFor(ctx, prov, g, live, release, req("template"))
	if err != nil {
		return "", err
	}
	if err := prov.SetTemplate(ctx, g, tmpl, req("set-template")); err != nil {
		return "", err
	}
	if err := prov.CreateInstances(ctx, g, []string{repl}, req("create")); err != nil {
		if w := waitReason(g, err); w != "" {
			return w, nil
		}
		return "", err
	}
	wait, err := l.waitInstances(ctx, prov, g, "replacement "+repl, func(insts []cloud.Instance) (bool, string, error) {
		in, ok := findInstance(insts, repl)
		switch {
		case !ok:
			return false, "", nil
		case in.Status == cloud.StatusRunning:
			return true, "", nil
		case in.LastError != nil:
			return false, waitReason(g, in.LastError), nil
		}
		return false, "", nil
	})
	if wait != "" {
		// The zone could not run it: delete it rather than leave an
		// instance the provider keeps trying, and try again later.
		if err := prov.DeleteInstances(ctx, g, []string{repl}, req("delete-stuck")); err != nil {
			return "", err
		}
	}
	return wait, err
}

// recreateInstance recreates live in place from the template of release.
func (l *leader) recreateInstance(ctx context.Context, prov cloud.Provider, g cloud.GroupRef, live string, release phases.Version, req func(string) string) (string, error) {
	tmpl, err := templateFor(ctx, prov, g, live, release, req("template"))
	if err != nil {
		return "", err
	}
	if err := prov.SetTemplate(ctx, g, tmpl, req("set-template")); err != nil {
		return "", err
	}
	insts, err := prov.ListInstances(ctx, g)
	if err != nil {
		return "", err
	}
	if in, ok := findInstance(insts, live); !ok || in.Template != tmpl {
		if err := prov.RecreateInstances(ctx, g, []string{live}, req("recreate")); err != nil {
			if w := waitReason(g, err); w != "" {
				return w, nil
			}
			return "", err
		}
	}
	return l.waitInstances(ctx, prov, g, "recreated "+live, func(insts []cloud.Instance) (bool, string, error) {
		in, ok := findInstance(insts, live)
		switch {
		case ok && in.Status == cloud.StatusRunning && in.Template == tmpl:
			return true, "", nil
		case ok && in.LastError != nil:
			return false, waitReason(g, in.LastError), nil
		}
		return false, "", nil
	})
}

// deleteInstance deletes an instance and its Node.
func (l *leader) deleteInstance(ctx context.Context, prov cloud.Provider, ops ClusterOps, g cloud.GroupRef, name, req string) error {
	if name == "" {
		return nil
	}
	if err := prov.DeleteInstances(ctx, g, []string{name}, req); err != nil {
		return err
	}
	if _, err := l.waitInstances(ctx, prov, g, "deletion of "+name, func(insts []cloud.Instance) (bool, string, error) {
		_, ok := findInstance(insts, name)
		return !ok, "", nil
	}); err != nil {
		return err
	}
	return l.retry(ctx, "delete node", func() error { return ops.DeleteNode(ctx, name) })
}

// waitReady waits until node is Ready at release, within WaitReadyTimeout.
func (l *leader) waitReady(ctx context.Context, ops ClusterOps, node string, release phases.Version) error {
	wctx, cancel := context.WithTimeout(ctx, l.cfg.WaitReadyTimeout)
	defer cancel()
	return ops.WaitReady(wctx, node, release.KubeletVersion())
}

// waitInstanceReady waits until an instance molt made or recreated — a
// surge replacement, an instance recreated in place, a green instance —
// is one molt can manage at release: its Node Ready with its kubelet at
// release (as waitReady), then its agent enrolled, registered, reporting,
// healthy and at release's kubelet, as the replicated state has it
// (agentManaged). One WaitReadyTimeout bounds both waits.
//
// Such an instance is upgraded only then, not when its Node is Ready: its
// template installs and starts the agent, which enrolls after the kubelet
// may already have registered the Node, and the next upgrade's preflight
// asks every node's agent. A blue/green pool that ended COMPLETED on Ready
// Nodes alone had the next upgrade, started seconds later, refused for
// its green agents "not registered".
func (l *leader) waitInstanceReady(ctx context.Context, ops ClusterOps, cluster, node string, release phases.Version) error {
	wctx, cancel := context.WithTimeout(ctx, l.cfg.WaitReadyTimeout)
	defer cancel()
	if err := ops.WaitReady(wctx, node, release.KubeletVersion()); err != nil {
		return err
	}
	// The agent's record changes only when its registration or a beat
	// that changes it (health, versions) is committed, and a new agent
	// comes up as the last stage of its instance's start, whose earlier
	// stages (the provider's) are polled every InstancePoll: that is this
	// wait's poll too. A finer poll finds nothing sooner (agents beat
	// every HeartbeatInterval); the leader's tick would tie a cloud wait
	// to the scheduler's pace.
	tick := time.NewTicker(l.cfg.InstancePoll)
	defer tick.Stop()
	for {
		err := l.agentManaged(cluster, node, release)
		if err == nil {
			return nil
		}
		select {
		case <-tick.C:
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err() // leadership lost: not this instance's failure
			}
			return fmt.Errorf("node %s is Ready at %s but not manageable within %s: %w", node, release.KubeletVersion(), l.cfg.WaitReadyTimeout, err)
		}
	}
}

// runPoolWork performs a blue/green pool's work for its phase and commits
// the outcome, pinned to the phase and attempt.
func (l *leader) runPoolWork(ctx context.Context, p tickPlan, a phases.Action) {
	log := l.log.With("cluster", p.cluster, "pool", a.Pool, "work", a.Reason, "id", a.ID)
	res := phases.PoolWorkResult{Upgrade: a.Upgrade, Pool: a.Pool, Work: a.Reason, Phase: phases.BlueGreenPhase(a.Phase), Attempt: a.Attempt}
	wait, err := l.poolWork(ctx, p, a, &res)
	if ctx.Err() != nil {
		return // leadership lost: the next leader redoes this work
	}
	switch {
	case err != nil:
		res.Message = err.Error()
		log.Warn("pool work failed; retried", "err", err)
	case wait != "":
		res.Wait, res.RetryAt, res.Message = wait, l.cloudRetryAt(), wait
		log.Info("pool work waits", "reason", wait)
	default:
		res.OK, res.Message = true, "done"
		log.Info("pool work done")
	}
	if _, err := l.apply(ctx, statemachine.PoolWorkResultCmd{Cluster: p.cluster, Result: res, Now: l.cfg.Clock.Now()}); err != nil && !isStale(err) {
		log.Warn("commit pool work result", "err", err)
	}
}

func (l *leader) poolWork(ctx context.Context, p tickPlan, a phases.Action, res *phases.PoolWorkResult) (string, error) {
	ops, err := l.clusterOps(p.cluster, p.kubeconfig)
	if err != nil {
		return "", err
	}
	prov, err := l.cloudFor(p.cloud)
	if err != nil {
		return "", err
	}
	track, _ := p.upgrade.Pool(a.Pool)
	r := reqOf(a.ID, track.BlueGreen.RetryAt)
	req := func(g cloud.GroupRef, call string) string { return r(call + "/" + g.String()) }
	limits := l.poolAutoscaling(p, a.Pool)
	switch a.Reason {
	case phases.WorkCreateGreen:
		return l.createGreen(ctx, prov, ops, p.upgrade, track, req, res)
	case phases.WorkReleaseGreen:
		return "", l.setGreenAutoscaling(ctx, prov, p.upgrade, track, limits, req)
	case phases.WorkDeleteBlue:
		return "", l.deleteBlue(ctx, prov, ops, p.cluster, p.upgrade, track, limits, req)
	case phases.WorkRollback:
		return "", l.rollbackBlueGreen(ctx, prov, ops, p.upgrade, track, limits, req)
	}
	return "", fmt.Errorf("unknown pool work %q", a.Reason)
}

// reqOf gives the req of each call an action makes: the action's ID, the
// call, and the time the action was last told to wait (zero at first).
// A repeat of the action — a new leader, a retry after a transient error
// — asks with the same req, which the provider treats as one request; a
// try after a wait (quota, stockout) asks anew, since a provider answers
// a request it remembers with its remembered refusal. The wait's time is
// taken to the nanosecond, as the upgrade record holds it: two waits in
// one second (a short --cloud-retry-interval) are two requests, else the
// provider would answer the second try's create with the first's — done,
// for an instance deleted since because the zone could not run it.
func reqOf(action string, retryAt time.Time) func(call string) string {
	return func(call string) string {
		if retryAt.IsZero() {
			return action + "/" + call
		}
		return fmt.Sprintf("%s/%s/w%d", action, call, retryAt.UnixNano())
	}
}

// poolAutoscaling is the pool's autoscaling range as registered (zero: no
// autoscaler limits).
func (l *leader) poolAutoscaling(p tickPlan, pool string) cloud.Autoscaling {
	a := p.autoscaling[pool]
	return cloud.Autoscaling{Min: a.MinNodes, Max: a.MaxNodes}
}

// createGreen freezes blue for the Kubernetes cluster autoscaler
// (freezeBlue), makes one green group per blue group, as large as blue,
// from the target release's template; pins blue's autoscaling (blue is not
// scaled during blue/green) and green's (it may scale from the soak on);
// and waits until every green Node is Ready at the target.
//
// It does not wait for green's agents (waitInstanceReady): a green node
// joins the cluster's spec, and its agent may enroll, only when this
// work's result commits (phases.PoolWorkMembership), so such a wait here
// could only time out. deleteBlue waits for them, before blue goes.
func (l *leader) createGreen(ctx context.Context, prov cloud.Provider, ops ClusterOps, u *phases.Upgrade, track *phases.PoolTrack,
	req func(cloud.GroupRef, string) string, res *phases.PoolWorkResult) (string, error) {
	if err := l.freezeBlue(ctx, ops, u, track); err != nil {
		return "", err
	}
	type plan struct {
		blue, green cloud.GroupRef
		size        int
	}
	var plans []plan
	need := map[string]int{}
	for _, g := range track.Groups {
		blue := cloud.GroupRef{Zone: g.Zone, Name: g.Name}
		green := cloud.GroupRef{Zone: g.Zone, Name: phases.GreenGroupName(g.Name, u.ID)}
		bg, err := prov.GetGroup(ctx, blue)
		if err != nil {
			return "", err
		}
		plans = append(plans, plan{blue: blue, green: green, size: bg.TargetSize})
		if _, err := prov.GetGroup(ctx, green); errors.Is(err, cloud.ErrNotFound) {
			need[g.Zone] += bg.TargetSize
		} else if err != nil {
			return "", err
		}
	}
	// Quota first (SPEC §7): a green pool that cannot be made whole waits.
	for zone, n := range need {
		q, err := prov.Quota(ctx, zone)
		if err != nil {
			return "", err
		}
		if q.Free() < n {
			return fmt.Sprintf("quota: the green pool needs %d instances in %s, %d free", n, zone, q.Free()), nil
		}
	}
	for _, pl := range plans {
		pin := cloud.Autoscaling{Min: pl.size, Max: pl.size}
		if err := prov.SetAutoscaling(ctx, pl.blue, pin, req(pl.blue, "pin-blue")); err != nil {
			return "", err
		}
		bg, err := prov.GetGroup(ctx, pl.blue)
		if err != nil {
			return "", err
		}
		tmpl, err := prov.EnsureTemplate(ctx, cloud.TemplateSpec{Release: u.To.String(), Base: bg.Template}, req(pl.blue, "template"))
		if err != nil {
			return "", err
		}
		if err := prov.CreateGroup(ctx, pl.green, tmpl, pl.size, req(pl.green, "create")); err != nil {
			if w := waitReason(pl.green, err); w != "" {
				return w, nil
			}
			return "", err
		}
		if err := prov.SetAutoscaling(ctx, pl.green, pin, req(pl.green, "pin-green")); err != nil {
			return "", err
		}
	}
	res.Green = nil
	for _, pl := range plans {
		var names []string
		wait, err := l.waitInstances(ctx, prov, pl.green, "green group "+pl.green.String(), func(insts []cloud.Instance) (bool, string, error) {
			names = names[:0]
			running := 0
			for _, in := range insts {
				names = append(names, in.Name)
				if in.Status == cloud.StatusRunning {
					running++
				} else if in.LastError != nil {
					return false, waitReason(pl.green, in.LastError), nil
				}
			}
			return len(insts) == pl.size && running == pl.size, "", nil
		})
		if wait != "" || err != nil {
			return wait, err
		}
		for _, name := range names {
			if err := l.waitReady(ctx, ops, name, u.To); err != nil {
				return "", fmt.Errorf("green node %s: %w", name, err)
			}
		}
		res.Green = append(res.Green, phases.GreenGroup{Zone: pl.green.Zone, Name: pl.green.Name, Nodes: append([]string(nil), names...)})
	}
	return "", nil
}

// setGreenAutoscaling gives the green groups the pool's autoscaling range.
func (l *leader) setGreenAutoscaling(ctx context.Context, prov cloud.Provider, u *phases.Upgrade, track *phases.PoolTrack, limits cloud.Autoscaling,
	req func(cloud.GroupRef, string) string) error {
	for _, g := range track.Groups {
		green := cloud.GroupRef{Zone: g.Zone, Name: phases.GreenGroupName(g.Name, u.ID)}
		if err := prov.SetAutoscaling(ctx, green, limits, req(green, "release-green")); err != nil {
			return err
		}
	}
	return nil
}

// deleteBlue waits until every green instance is one molt can manage at
// the target (waitInstanceReady: its Node Ready, its agent registered and
// healthy at the release), then deletes the pods on blue nodes (PDBs do
// not hold them; grace capped at an hour), then the blue groups and their
// Nodes, and gives green the pool's autoscaling range. The wait is here,
// the first work after green's agents may enroll that every pool runs
// before it is COMPLETED, and before anything of blue is deleted: a green
// agent that does not come fails the attempt (retried), blue intact.
func (l *leader) deleteBlue(ctx context.Context, prov cloud.Provider, ops ClusterOps, cluster string, u *phases.Upgrade, track *phases.PoolTrack, limits cloud.Autoscaling,
	req func(cloud.GroupRef, string) string) error {
	for _, g := range track.BlueGreen.Green {
		insts, err := prov.ListInstances(ctx, cloud.GroupRef{Zone: g.Zone, Name: g.Name})
		if err != nil {
			return err
		}
		for _, name := range g.Nodes {
			if _, ok := findInstance(insts, name); !ok {
				continue // the autoscaler sizes green from the soak on
			}
			if err := l.waitInstanceReady(ctx, ops, cluster, name, u.To); err != nil {
				return fmt.Errorf("green node %s: %w", name, err)
			}
		}
	}
	blue := u.PoolNodes(track)
	for _, n := range blue {
		left, err := ops.DeletePods(ctx, n.Live())
		if err != nil {
			return fmt.Errorf("delete pods on %s: %w", n.Live(), err)
		}
		if len(left) > 0 {
			l.log.Warn("pods still terminating on a blue node at the grace cap; deleting it anyway", "node", n.Live(), "pods", len(left))
		}
	}
	for _, g := range track.Groups {
		ref := cloud.GroupRef{Zone: g.Zone, Name: g.Name}
		if err := prov.DeleteGroup(ctx, ref, req(ref, "delete-blue")); err != nil {
			return err
		}
	}
	for _, n := range blue {
		if err := l.retry(ctx, "delete node", func() error { return ops.DeleteNode(ctx, n.Live()) }); err != nil {
			return err
		}
	}
	return l.setGreenAutoscaling(ctx, prov, u, track, limits, req)
}

// freezeBlue marks every blue node for the Kubernetes cluster
// autoscaler, which reads neither the pin of the Compute Engine
// autoscaler nor a cordon: scale-down disabled, and a NoSchedule taint
// that its template of blue's node group copies, so a pending pod does
// not fit on a new blue node and blue is not scaled up (SPEC §7 phase 1,
// §10; kube.TaintBluePool says why it must be put on before the cordon).
// The marks stay until blue's Nodes are deleted; a rollback takes them
// off (rollbackBlueGreen), as the blue pool may be scaled again then.
func (l *leader) freezeBlue(ctx context.Context, ops ClusterOps, u *phases.Upgrade, track *phases.PoolTrack) error {
	for _, n := range u.PoolNodes(track) {
		if err := l.retry(ctx, "freeze blue node", func() error { return ops.FreezeBlueNode(ctx, n.Live()) }); err != nil {
			return err
		}
	}
	return nil
}

// rollbackBlueGreen uncordons blue and takes off its autoscaler marks
// (freezeBlue), gives its groups the pool's autoscaling range back and
// deletes the green groups and their Nodes.
func (l *leader) rollbackBlueGreen(ctx context.Context, prov cloud.Provider, ops ClusterOps, u *phases.Upgrade, track *phases.PoolTrack, limits cloud.Autoscaling,
	req func(cloud.GroupRef, string) string) error {
	for _, n := range u.PoolNodes(track) {
		if err := l.retry(ctx, "uncordon", func() error { return ops.Uncordon(ctx, n.Live()) }); err != nil {
			return err
		}
		if err := l.retry(ctx, "thaw blue node", func() error { return ops.ThawBlueNode(ctx, n.Live()) }); err != nil {
			return err
		}
	}
	for _, g := range track.Groups {
		blue := cloud.GroupRef{Zone: g.Zone, Name: g.Name}
		if err := prov.SetAutoscaling(ctx, blue, limits, req(blue, "restore-blue")); err != nil {
			return err
		}
		green := cloud.GroupRef{Zone: g.Zone, Name: phases.GreenGroupName(g.Name, u.ID)}
		// Green's instances are listed from the provider, not from the
		// state: a green group made before its result was committed has
		// Nodes too.
		insts, err := prov.ListInstances(ctx, green)
		if err != nil && !errors.Is(err, cloud.ErrNotFound) {
			return err
		}
		if err := prov.DeleteGroup(ctx, green, req(green, "delete-green")); err != nil {
			return err
		}
		for _, in := range insts {
			if err := l.retry(ctx, "delete node", func() error { return ops.DeleteNode(ctx, in.Name) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// cloudRetryAt is when a waiting step is tried again.
func (l *leader) cloudRetryAt() time.Time {
	return l.cfg.Clock.Now().Add(l.cfg.CloudRetryInterval)
}
