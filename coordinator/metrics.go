package coordinator

import (
	"strings"
	"time"

	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/metrics"
	"github.com/moltproject/molt/phases"
)

// The coordinator is the metrics package's Source: every scrape reads the
// replicated state, so metrics never drift from what the API shows.

// Now is the coordinator's clock.
func (c *Coordinator) Now() time.Time { return c.cfg.Clock.Now() }

// RaftView reports this member's Raft state.
func (c *Coordinator) RaftView() metrics.RaftView {
	st := c.store.Stats()
	h, halted := c.store.Halted()
	return metrics.RaftView{
		State: strings.ToLower(st.State), Term: st.Term, LastIndex: st.LastLogIndex,
		CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		Leader: c.store.IsLeader(), HasLeader: st.LeaderID != "",
		Halted: halted, HaltedIndex: h.Index,
		Members: c.memberViews(),
	}
}

// memberViews is every member's release as this member knows it
// (molt_member_info, exported by the leader only).
func (c *Coordinator) memberViews() []metrics.MemberView {
	if !c.store.IsLeader() {
		return nil
	}
	ms, err := c.store.Members()
	if err != nil {
		return nil
	}
	out := make([]metrics.MemberView, 0, len(ms))
	for _, m := range ms {
		caps, from, _ := c.capsOf(m.ID)
		out = append(out, metrics.MemberView{ID: m.ID, Version: caps.Version, Source: from})
	}
	return out
}

// AgentsView reports every registered agent's liveness and drift.
func (c *Coordinator) AgentsView() []metrics.AgentView {
	var out []metrics.AgentView
	drift := map[string]map[string]string{}
	for _, a := range c.sm.Agents() {
		d, ok := drift[a.Cluster]
		if !ok {
			d, _ = c.sm.Drift(a.Cluster)
			drift[a.Cluster] = d
		}
		v := metrics.AgentView{Cluster: a.Cluster, Node: a.Node, Missing: a.Missing, Drift: d[a.Node] != ""}
		if t, ok := c.live.lastSeen(nodeKey(a.Cluster, a.Node)); ok {
			v.LastSeen = t
		}
		out = append(out, v)
	}
	return out
}

// ClustersView reports every cluster's versions and upgrade progress.
func (c *Coordinator) ClustersView() []metrics.ClusterView {
	now := c.cfg.Clock.Now()
	recs := c.sm.Clusters()
	byName := make(map[string]*statemachine.ClusterRecord, len(recs))
	for i := range recs {
		byName[recs[i].Spec.Name] = &recs[i]
	}
	auto := map[string]schedule.Decision{}
	for _, d := range schedule.Evaluate(c.sm.SchedulerFleet(c.cfg.AutoUpgradeLimits), now).Decisions {
		auto[d.Cluster] = d
	}
	var out []metrics.ClusterView
	for i := range recs {
		r := &recs[i]
		pctx, err := c.sm.PolicyContext(r.Spec.Name, now)
		if err != nil {
			continue // deleted since
		}
		v := clusterMetrics(r, byName[r.Spec.AdminCluster], pctx, now)
		if d, ok := auto[r.Spec.Name]; ok {
			v.AutoUpgradeState, v.AutoUpgradeFailures = string(d.Status.State), d.State.Failures
			v.AutoUpgradeNextAttempt = d.Status.NextAttempt
			v.EndOfSupportUpgrade = endOfSupportUpgrade(d.Status)
		}
		out = append(out, v)
	}
	return out
}

// endOfSupportUpgrade is when the end of support forces the cluster's
// next minor upgrade (zero: none is due, or it runs): the end of support,
// or the next opportunity (a backoff's end) when later.
func endOfSupportUpgrade(st schedule.Status) time.Time {
	if !st.Forced || st.State == schedule.StateRunning || st.State == schedule.StatePausedAtWindowEnd {
		return time.Time{}
	}
	at := st.EndOfSupport
	if st.NextOpportunity.After(at) {
		at = st.NextOpportunity
	}
	return at
}

// clusterMetrics renders a cluster's record for the metrics; admin is its
// admin cluster's record (nil: none) and ctx its policy context.
func clusterMetrics(r, admin *statemachine.ClusterRecord, ctx maintenance.ValidationContext, now time.Time) metrics.ClusterView {
	v := metrics.ClusterView{Name: r.Spec.Name, Version: r.StatusVersion.String(), TargetVersion: r.Spec.Version.String(),
		Phase: "idle", NodesPerVersion: r.NodeVersions("")}
	v.EndOfSupport = ctx.EndOfSupport
	v.SkewViolation = skewViolated(r, admin)
	if r.Policy != nil && !ctx.EndOfSupport.IsZero() && r.ActiveUpgrade() == nil {
		if cp, err := r.Policy.Compile(); err == nil {
			next, ok := cp.NextOpportunity(maintenance.Change{Target: maintenance.TargetControlPlane, Kind: maintenance.KindMinor}, now)
			v.MinorBlockedPastEOS = !ok || next.After(ctx.EndOfSupport)
		}
	}
	u := r.Upgrade
	if u == nil {
		return v
	}
	switch {
	case u.State == phases.UpgradePreflight:
		v.Phase = "preflight"
	case u.State == phases.UpgradeRefused:
		v.Phase = "refused"
	case u.State == phases.UpgradeRunning && u.PauseReason != "":
		v.Phase, v.PauseReason = "paused", u.PauseReason
	case u.State == phases.UpgradeRunning:
		v.Phase = "running"
	case u.State == phases.UpgradeDone:
		v.Phase = "done"
	case u.State == phases.UpgradeFailed:
		v.Phase = "failed"
	case u.State == phases.UpgradeCancelled:
		v.Phase = "cancelled"
	}
	spec := r.Spec
	spec.Version = u.From
	plan := phases.MakePlan(&spec, u.To, u.Options, phases.DefaultDurations(), u.CreatedAt)
	expected := map[string]time.Duration{}
	for _, s := range plan.Steps {
		expected[s.ID] = s.End.Sub(s.Start)
	}
	for _, s := range u.Steps {
		sv := metrics.StepView{Name: s.ID, State: stepState(s.State), StartedAt: s.StartedAt, Expected: expected[s.ID]}
		if s.State == phases.StateRunning && v.Phase == "paused" {
			sv.State = "paused"
		}
		if s.State == phases.StateRunning && u.ResumedAt.After(sv.StartedAt) {
			sv.StartedAt = u.ResumedAt
		}
		v.Steps = append(v.Steps, sv)
	}
	for i := range u.Pools {
		p := &u.Pools[i]
		pv := metrics.PoolView{Name: p.Name, Role: string(p.Role), NodesTotal: p.Count, Cloud: p.Backing == phases.BackingMIG, Waiting: map[string]int{}}
		if bg := p.BlueGreen; bg != nil && bg.Waiting != "" {
			pv.Waiting[waitKind(bg.Waiting)]++
		}
		for _, n := range u.PoolNodes(p) {
			if n.Waiting != "" && n.State == phases.StateRunning {
				pv.Waiting[waitKind(n.Waiting)]++
			}
			switch n.State {
			case phases.StateDone:
				pv.NodesDone++
			case phases.StateRunning:
				pv.NodesUpgrading++
			case phases.StateFailed:
				pv.NodesFailed++
			}
		}
		if u.Options.StepLayout >= phases.StepLayoutGates && p.BlueGreen == nil {
			pv.Gates = []string{phases.CheckNodeReady, phases.CheckAgent, phases.CheckWorkloads}
			for _, g := range p.Gates {
				pv.Gates = append(pv.Gates, g.Name)
			}
			pv.Red, pv.MaxFailedNodes = map[string]int{}, p.MaxFailedNodes
			for _, n := range u.PoolNodes(p) {
				if n.RedGate != "" && n.State == phases.StateRunning {
					pv.Red[n.RedGate]++
				}
			}
		}
		step, _ := u.Step(phases.PoolStepID(p.Name))
		pv.Phase = poolPhase(p, step, v.Phase == "paused")
		switch {
		case p.MaxFailedNodes == 0 && pv.NodesFailed > 0:
			// Layouts before failure budgets: a failed node halts the pool.
			pv.Phase = "failed"
		case p.FailReason != "" && pv.Phase == "running":
			pv.Phase = "failed" // past its budget; started nodes finishing
		}
		v.Pools = append(v.Pools, pv)
	}
	return v
}

// stepState is a step's value of molt_upgrade_step_state: the state's own
// name, in the metrics' snake case ("rolledBack" is "rolled_back", as the
// pool phase names it).
func stepState(s phases.State) string {
	if s == phases.StateRolledBack {
		return "rolled_back"
	}
	return string(s)
}

// waitKind is the reason label of a wait for the cloud: the wait reasons
// the MIG work writes start with it ("quota: …", "stockout: …").
func waitKind(reason string) string {
	kind, _, _ := strings.Cut(reason, ":")
	return kind
}

// poolPhase is a pool's value of molt_pool_upgrade_phase: its step's state,
// or where a running pool is — cancelled, paused by the window, rolling
// back, or in a blue/green phase (GKE's names, lower case).
func poolPhase(p *phases.PoolTrack, step *phases.Step, paused bool) string {
	switch step.State {
	case phases.StateRolledBack:
		return "rolled_back"
	case phases.StateRunning:
	default:
		return string(step.State)
	}
	bg := p.BlueGreen
	switch {
	case p.RollingBack, bg != nil && bg.Phase == phases.PhaseRollbackStarted:
		return "rolling_back"
	case p.Cancelled:
		return "cancelled"
	case paused:
		return "paused"
	case bg != nil:
		switch bg.Phase {
		case phases.PhaseCreatingGreen:
			return "creating_green"
		case phases.PhaseCordoningBlue:
			return "cordoning_blue"
		case phases.PhaseDrainingBlue:
			return "draining_blue"
		case phases.PhaseSoaking:
			return "soaking"
		case phases.PhaseDeletingBlue:
			return "deleting_blue"
		}
	}
	return "running"
}

// skewViolated reports a broken version rule: more than two versions or a
// kubelet newer than the control plane inside the cluster, or an admin
// cluster more than one minor ahead of this user cluster.
//
// The control plane's version is its oldest node's, read from the upgrade
// record when it holds the nodes' versions. Status version would not do:
// it moves only when an upgrade is done, so after a minor that failed or
// was cancelled once the control plane was upgraded (status at the old
// version, the control plane at the new) every upgraded node looked newer
// than the control plane — a violation the cluster did not have (the
// chaos runs found it: seed 201, a wrong checksum halted the workers). The
// control-plane load balancers are upgraded before the control plane
// (SPEC §4) and are not held to it.
func skewViolated(r, admin *statemachine.ClusterRecord) bool {
	cp, all, held := nodeSkewView(r)
	if len(all) > 2 || phases.CheckNodeVersions(cp, held) != nil {
		return true
	}
	if admin != nil && r.Spec.Kind == phases.KindUser {
		return admin.StatusVersion.Minor-r.StatusVersion.Minor > 1
	}
	return false
}

// nodeSkewView returns the control plane's version, the versions of every
// node, and those of the nodes that must not be newer than the control
// plane (all but the control plane and its load balancers).
func nodeSkewView(r *statemachine.ClusterRecord) (cp phases.Version, all, held map[phases.Version]int) {
	all, held = map[phases.Version]int{}, map[phases.Version]int{}
	u := r.Upgrade
	if u == nil || u.To != r.Spec.Version {
		// No upgrade holds the nodes' versions: every node runs status.
		for s, n := range r.NodeVersions("") {
			if v, err := phases.ParseVersion(s); err == nil {
				all[v] += n
				held[v] += n
			}
		}
		return r.StatusVersion, all, held
	}
	var oldest *phases.Version
	for i := range u.Pools {
		p := &u.Pools[i]
		for v, n := range u.PoolVersionCounts(p) {
			if n == 0 {
				continue
			}
			all[v] += n
			switch p.Role {
			case phases.RoleControlPlane:
				if oldest == nil || v.Less(*oldest) {
					oldest = &v
				}
			case phases.RoleControlPlaneLB:
			default:
				held[v] += n
			}
		}
	}
	if oldest == nil { // no control-plane pool in the record
		return r.StatusVersion, all, held
	}
	return *oldest, all, held
}
