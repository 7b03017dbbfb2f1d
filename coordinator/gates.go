package coordinator

import (
	"context"
	"fmt"
	"sync"

	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/promgate"
)

// GateQuerier evaluates a PromQL health gate on the Prometheus at base:
// whether it holds now, and the value to report (package promgate).
type GateQuerier interface {
	Query(ctx context.Context, base, expr string) (promgate.Result, error)
}

// runGates is a node's gates step (SPEC §16): it looks once at every
// check — the node Ready with its kubelet at the version it goes to, its
// agent healthy, the controllers its drain evicted back to their desired
// ready replicas, each PromQL gate of its pool — and commits what it saw.
// The state machine judges (phases.Upgrade.applyGates): a red check holds
// the pool until the gate deadline, green ones must hold for the pool's
// soak; either way the step is looked at again after GateInterval.
// accessErr is why the cluster's API server cannot be reached, if it
// cannot: the checks that need it are red with that reason.
func (l *leader) runGates(ctx context.Context, p tickPlan, a phases.Action, ops ClusterOps, accessErr error) {
	n, ok := p.upgrade.Node(a.Node)
	if !ok {
		return
	}
	pool, _ := p.upgrade.Pool(n.Pool)
	live, target := n.Live(), p.upgrade.TargetOf(n)
	checks := make([]phases.GateCheck, 3+len(pool.Gates))
	check := func(i int, name string, err error) {
		checks[i] = phases.GateCheck{Name: name, OK: err == nil}
		if err != nil {
			checks[i].Value = err.Error()
		}
	}
	var wg sync.WaitGroup
	if accessErr != nil {
		check(0, phases.CheckNodeReady, accessErr)
		check(2, phases.CheckWorkloads, accessErr)
	} else {
		wg.Add(2)
		go func() {
			defer wg.Done()
			check(0, phases.CheckNodeReady, ops.NodeReady(ctx, live, target.KubeletVersion()))
		}()
		go func() { defer wg.Done(); check(2, phases.CheckWorkloads, ops.WorkloadsReady(ctx, n.Drained)) }()
	}
	check(1, phases.CheckAgent, l.agentHealthy(p.cluster, live, pool.Backing == phases.BackingMIG))
	for i, g := range pool.Gates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := l.gates.Query(ctx, g.Prometheus, g.Expr)
			checks[3+i] = phases.GateCheck{Name: g.Name, OK: err == nil && res.Holds, Value: res.Value}
			if err != nil {
				checks[3+i].Value = err.Error()
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	now := l.cfg.Clock.Now()
	r := phases.NodeStepResult{Upgrade: a.Upgrade, Node: a.Node, Cursor: a.Cursor, Attempt: a.Attempt, OK: true,
		Gates: checks, RetryAt: now.Add(l.cfg.GateInterval)}
	for _, ch := range checks {
		if !ch.OK {
			l.log.Info("health gate red", "cluster", p.cluster, "node", a.Node, "gate", ch.Name, "value", ch.Value)
			break
		}
	}
	l.commitNode(ctx, p.cluster, r, a.ID)
	if l.cfg.Recorder != nil {
		for _, ch := range checks {
			l.cfg.Recorder.Gate(p.cluster, n.Pool, ch.Name, ch.OK)
		}
	}
}

// agentHealthy is nil when the node's agent is registered, reporting and
// healthy as the replicated state has it. An instance of a MIG pool whose
// agent never registered passes: molt runs no operation there (the
// instance template installs what it runs), and its Node's readiness is
// checked on its own.
//
// Since instances molt makes or recreates are upgraded only once their
// agents are registered (waitInstanceReady, before any gates step of
// theirs), that exemption is reached only by an instance waited for
// before that rule: a node of an upgrade in flight when the coordinator
// was upgraded. It is kept for them — holding their gates now would fail
// a node whose wait already passed — and changes nothing else: a
// registration is never undone while the node is in the cluster, so an
// agent that goes away later is "missing", which no pool passes.
func (l *leader) agentHealthy(cluster, node string, mig bool) error {
	a, ok := l.sm.Agent(cluster, node)
	if mig && (!ok || !a.Registered) {
		return nil
	}
	return agentState(node, a, ok)
}

// agentManaged is nil when node's agent is one molt can manage at release:
// registered, reporting and healthy (agentHealthy's checks, without its
// exemption) with the release's kubelet (AgentRecord.Kubelet as the agent
// reports `kubelet --version`, "v1.34.4").
func (l *leader) agentManaged(cluster, node string, release phases.Version) error {
	a, ok := l.sm.Agent(cluster, node)
	if err := agentState(node, a, ok); err != nil {
		return err
	}
	if want := release.KubeletVersion(); a.Kubelet != want {
		got := a.Kubelet
		if got == "" {
			got = "no version"
		}
		return fmt.Errorf("agent of %s reports kubelet %s, want %s", node, got, want)
	}
	return nil
}

// agentState is why agent record a (ok: there is one) of node is not
// registered, reporting and healthy; nil when it is.
func agentState(node string, a statemachine.AgentRecord, ok bool) error {
	switch {
	case !ok || !a.Registered:
		return fmt.Errorf("agent of %s not registered", node)
	case a.Missing:
		return fmt.Errorf("agent of %s missing since %s", node, a.ChangedAt.Format("15:04:05"))
	case !a.Healthy:
		return fmt.Errorf("agent of %s reports unhealthy", node)
	}
	return nil
}
