package coordinator

import (
	"context"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
)

// tickPlan is one cluster's decision and what acting on it needs: copies
// taken from the state machine, never references into its state.
type tickPlan struct {
	cluster    string
	upgrade    *phases.Upgrade // a copy; nil when no upgrade is active
	decision   phases.Decision
	release    *api.Release
	kubeconfig string // as stored: sealed, or plain text from old entries (clusterOps opens it)
	// cloud and autoscaling: the cluster's cloud adapter and its MIG
	// pools' autoscaling ranges (statemachine.ActiveUpgrade).
	cloud       *phases.CloudSpec
	autoscaling map[string]phases.Autoscaling
}

// minWake is the shortest sleep of the leader loop between ticks that
// applied nothing, so that a wake time already due cannot spin it.
const minWake = 10 * time.Millisecond

// tick decides for every cluster with an active upgrade, commits the
// decisions that are state transitions, and starts the work the others
// describe. again is true when the FSM applied at least one of the
// committed actions, so the loop decides again at once on the new state; a
// batch refused entirely as stale changed nothing and does not count.
// Otherwise the loop may sleep for sleep: until the earliest time a
// decision changes by itself (phases.Decision.NextWake), at most
// TickInterval.
func (l *leader) tick(ctx context.Context) (again bool, sleep time.Duration) {
	now := l.cfg.Clock.Now()
	plans := l.plan(now)
	again = l.act(ctx, now, plans)
	scheduled, due := l.scheduleAuto(ctx, now) // scheduler.go
	next := earliestWake(plans)
	if next.IsZero() || due.Before(next) {
		next = due
	}
	return again || scheduled, wakeDelay(now, next, l.cfg.TickInterval)
}

// earliestWake is the earliest NextWake of the plans' decisions (zero when
// none has one).
func earliestWake(plans []tickPlan) time.Time {
	var next time.Time
	for _, p := range plans {
		w := p.decision.NextWake
		if !w.IsZero() && (next.IsZero() || w.Before(next)) {
			next = w
		}
	}
	return next
}

// wakeDelay is how long the leader loop sleeps at now when a decision
// changes by itself at next (zero: never): until then, at most interval,
// at least minWake (or interval, when that is shorter).
func wakeDelay(now, next time.Time, interval time.Duration) time.Duration {
	if next.IsZero() {
		return interval
	}
	return min(max(next.Sub(now), minWake), interval)
}

// plan decides for every cluster, on copies of the running upgrades the
// state machine holds (ActiveUpgrades); a decision made on a state that has
// moved on since is refused when its advance applies.
func (l *leader) plan(now time.Time) []tickPlan {
	active := map[string]statemachine.ActiveUpgrade{}
	for _, a := range l.sm.ActiveUpgrades() {
		active[a.Cluster] = a
	}
	var plans []tickPlan
	for _, name := range l.sm.ClusterNames() {
		a, ok := active[name]
		if !ok {
			plans = append(plans, tickPlan{cluster: name})
			continue
		}
		gate := gateFor(a.Policy, a.Upgrade, now)
		plans = append(plans, tickPlan{
			cluster: name, upgrade: a.Upgrade, decision: phases.Decide(a.Upgrade, now, gate),
			release: a.Release, kubeconfig: a.Kubeconfig, cloud: a.Cloud, autoscaling: a.Autoscaling,
		})
	}
	return plans
}

// act commits the plans' transitions, offers their dispatches and starts
// their work, then runs the preflights and the liveness sweep. It reports
// whether the FSM applied any committed action.
func (l *leader) act(ctx context.Context, now time.Time, plans []tickPlan) bool {
	applied := false
	allOffers := map[string]map[string][]api.Operation{}
	l.preflightWork(ctx, now, allOffers)
	for _, p := range plans {
		offers := allOffers[p.cluster]
		if offers == nil {
			offers = map[string][]api.Operation{}
		}
		if p.upgrade == nil {
			l.dispatch.setCluster(p.cluster, offers)
			continue
		}
		var commits []phases.Action
		for _, a := range p.decision.Actions {
			switch {
			case a.Kind == phases.ActStartStep && p.upgrade.Options.Automatic && isPoolStep(p.upgrade, a.Step):
				// The pool's protected pods are read first and committed
				// with the start (SPEC §8); until then Decide offers the
				// same start again.
				l.startWork(ctx, "protect/"+a.ID, func(ctx context.Context) { l.startProtectedPool(ctx, p, a) })
			case a.Commits():
				commits = append(commits, a)
			case a.Kind == phases.ActDispatch:
				op, nothing := materialize(a, p.release, p.upgrade.To)
				if a.NodeStep.Op != nil && a.NodeStep.Op.Kind == phases.OpRollback {
					op, nothing = rollbackOp(a, p.upgrade)
				}
				if nothing != "" {
					l.startWork(ctx, a.ID, func(ctx context.Context) {
						l.commitNodeResult(ctx, p.cluster, a, nil, nothing, nil)
					})
					continue
				}
				offers[a.Node] = append(offers[a.Node], op)
			case a.Kind == phases.ActUpdateAgent:
				op, nothing := agentOp(a, p.release)
				if nothing != "" {
					l.startWork(ctx, a.ID, func(ctx context.Context) {
						r := phases.AgentResult{Upgrade: a.Upgrade, Node: a.Node, Attempt: a.Attempt, Message: nothing}
						if err := l.commitAgentResult(ctx, p.cluster, r); err != nil {
							l.log.Warn("commit agent result", "cluster", p.cluster, "node", a.Node, "err", err)
						}
					})
					continue
				}
				offers[a.Node] = append(offers[a.Node], op)
			case a.Kind == phases.ActRunNodeStep:
				l.startWork(ctx, a.ID, func(ctx context.Context) { l.runNodeStep(ctx, p, a) })
			case a.Kind == phases.ActRunStep && a.Step == phases.StepIDBackup:
				// The snapshot is an agent's work (backups.go): offered to
				// one control-plane host, answered by its result.
				node, why := l.backupHost(p.cluster, p.upgrade)
				if node != "" {
					offers[node] = append(offers[node], backupOp(a))
					continue
				}
				l.startWork(ctx, a.ID, func(ctx context.Context) {
					res := phases.StepResult{Upgrade: a.Upgrade, Step: a.Step, Attempt: a.Attempt, Message: why}
					if err := l.commitBackupStep(ctx, p.cluster, res); err != nil {
						l.log.Warn("commit backup step", "cluster", p.cluster, "err", err)
					}
				})
			case a.Kind == phases.ActRunStep:
				l.startWork(ctx, a.ID, func(ctx context.Context) { l.runStep(ctx, p, a) })
			case a.Kind == phases.ActRunPoolWork:
				l.startWork(ctx, a.ID, func(ctx context.Context) { l.runPoolWork(ctx, p, a) })
			}
		}
		l.dispatch.setCluster(p.cluster, offers)
		if len(commits) > 0 {
			v, err := l.apply(ctx, statemachine.AdvanceCmd{Cluster: p.cluster, Upgrade: p.upgrade.ID, Actions: commits, Now: now})
			if err != nil {
				l.log.Warn("commit decisions", "cluster", p.cluster, "err", err)
				continue
			}
			res, _ := v.(statemachine.AdvanceResult)
			if len(res.Stale) > 0 {
				l.log.Debug("decisions refused as stale", "cluster", p.cluster, "stale", res.Stale)
			}
			applied = applied || len(res.Applied) > 0
		}
	}
	l.live.sweep(ctx, l.Coordinator, now)
	return applied
}

// isPoolStep reports whether step is one of u's pool steps.
func isPoolStep(u *phases.Upgrade, step string) bool {
	s, ok := u.Step(step)
	return ok && s.Kind == phases.StepPool
}
