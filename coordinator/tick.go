package coordinator

import (
	"context"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
)

// tickPlan is what one cluster's decision needs outside the FSM lock.
type tickPlan struct {
	cluster    string
	upgrade    *phases.Upgrade // nil when no upgrade is active
	decision   phases.Decision
	release    *api.Release
	kubeconfig string
}

// tick decides for every cluster with an active upgrade, commits the
// decisions that are state transitions, and starts the work the others
// describe. It returns true when it committed something, so the loop
// decides again at once on the new state.
func (c *Coordinator) tick(ctx context.Context) bool {
	now := c.cfg.Clock.Now()
	var plans []tickPlan
	c.fsm.read(func(st *state) {
		for _, name := range sortedKeys(st.Clusters) {
			r := st.Clusters[name]
			u := r.activeUpgrade()
			if u == nil {
				plans = append(plans, tickPlan{cluster: name})
				continue
			}
			gate := gateFor(r, u, now)
			plans = append(plans, tickPlan{
				cluster: name, upgrade: u, decision: phases.Decide(u, now, gate),
				release: st.Releases[u.To.String()], kubeconfig: r.Kubeconfig,
			})
		}
	})
	committed := false
	allOffers := map[string]map[string][]api.Operation{}
	c.preflightWork(ctx, now, allOffers)
	for _, p := range plans {
		offers := allOffers[p.cluster]
		if offers == nil {
			offers = map[string][]api.Operation{}
		}
		if p.upgrade == nil {
			c.dispatch.setCluster(p.cluster, offers)
			continue
		}
		var commits []phases.Action
		for _, a := range p.decision.Actions {
			switch {
			case a.Commits():
				commits = append(commits, a)
			case a.Kind == phases.ActDispatch:
				op, nothing := materialize(a, p.release, p.upgrade.To)
				if nothing != "" {
					c.startWork(ctx, a.ID, func(ctx context.Context) {
						c.commitNodeResult(ctx, p.cluster, a, nil, nothing, nil)
					})
					continue
				}
				offers[a.Node] = append(offers[a.Node], op)
			case a.Kind == phases.ActRunNodeStep:
				c.startWork(ctx, a.ID, func(ctx context.Context) { c.runNodeStep(ctx, p, a) })
			case a.Kind == phases.ActRunStep:
				c.startWork(ctx, a.ID, func(ctx context.Context) { c.runStep(ctx, p, a) })
			}
		}
		c.dispatch.setCluster(p.cluster, offers)
		if len(commits) > 0 {
			_, err := c.apply(ctx, cmdAdvance, advanceCmd{Cluster: p.cluster, Upgrade: p.upgrade.ID, Actions: commits, Now: now})
			if err != nil {
				c.log.Warn("commit decisions", "cluster", p.cluster, "err", err)
				continue
			}
			committed = true
			for _, a := range commits {
				if a.Kind == phases.ActStartStep && p.upgrade.Options.Automatic {
					c.startWork(ctx, "protect/"+a.ID, func(ctx context.Context) { c.recordProtection(ctx, p, a.Step) })
				}
			}
		}
	}
	c.live.sweep(ctx, c, now)
	return committed
}
