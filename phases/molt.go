package phases

import (
	"fmt"
	"time"
)

// The molt step (StepLayoutMolt): before any Kubernetes step of an
// upgrade, every host whose molt-agent runs another release than the one
// the target release names (Options.AgentVersion) gets that agent. The
// agent replaces itself through a journaled operation (docs/agent.md); the
// engine decides which hosts, in which order and how many at once, and
// when one has taken too long.
//
// Hosts go pool by pool in the order of the pool steps (control-plane
// load balancers, control plane, load balancers, workers), at most the
// pool's Concurrency at once, like the pool's own node work. Replacing an
// agent drains nothing and restarts neither kubelet nor containerd, so
// MinAvailable does not bound it. A host that fails stops the step from
// starting others; once none runs, the step fails with the host's reason
// and the upgrade with it, before any Kubernetes component was touched.

// AgentTask is one host's agent replacement in the molt step.
type AgentTask struct {
	Node string
	Pool string
	// From is the molt-agent release the node's agent reported when the
	// upgrade was proposed ("" when none was known: the host is updated
	// all the same).
	From  string
	State State
	// Attempt is part of the operation's ID (AgentOperationID).
	Attempt    int
	StartedAt  time.Time
	FinishedAt time.Time
	// Version is the release the agent reported once replaced.
	Version string
	Error   string
}

// AgentResult is the outcome of a host's agent replacement, pinned to its
// attempt: the new agent's report (OK, with the Version it runs), or the
// failure the agent that runs after it reported (a rollback, a download
// that did not verify).
type AgentResult struct {
	Upgrade string
	Node    string
	Attempt int
	OK      bool
	Message string
	Version string
}

// Action kinds of the molt step.
const (
	// ActStartAgent starts a host's agent replacement (commit).
	ActStartAgent ActionKind = "startAgent"
	// ActUpdateAgent is the replacement's work: the coordinator offers
	// the agent its operation (AgentOperationID).
	ActUpdateAgent ActionKind = "updateAgent"
	// ActFailAgent fails a replacement whose new agent did not report
	// within Options.AgentTimeout (commit).
	ActFailAgent ActionKind = "failAgent"
)

// agentHosts lists the nodes of c whose agent is not known to run
// opts.AgentVersion, pool by pool in step order; nil when the layout has
// no molt step or the release names no agent.
func agentHosts(c *ClusterSpec, opts Options) []AgentTask {
	if opts.StepLayout < StepLayoutMolt || opts.AgentVersion == "" {
		return nil
	}
	var out []AgentTask
	for _, role := range []Role{RoleControlPlaneLB, RoleControlPlane, RoleLoadBalancer, RoleWorker} {
		for _, p := range c.Pools {
			if p.Role != role {
				continue
			}
			for _, n := range p.Nodes {
				if from := opts.AgentVersions[n.Name]; from != opts.AgentVersion {
					out = append(out, AgentTask{Node: n.Name, Pool: p.Name, From: from, State: StatePending})
				}
			}
		}
	}
	return out
}

// AgentOperationID is the ID of the agent operation that replaces node's
// agent at attempt: "<upgrade>/<node>/molt/a<attempt>".
func (u *Upgrade) AgentOperationID(node string, attempt int) string {
	return fmt.Sprintf("%s/%s/molt/a%d", u.ID, node, attempt)
}

// Agent returns node's task in the molt step.
func (u *Upgrade) Agent(node string) (*AgentTask, bool) {
	for i := range u.Agents {
		if u.Agents[i].Node == node {
			return &u.Agents[i], true
		}
	}
	return nil, false
}

// decideMolt decides the running molt step: the next hosts of the first
// pool with hosts left, the work of those running, their deadlines, and
// the step's end.
func decideMolt(u *Upgrade, s *Step, now time.Time, d *Decision) {
	failed := ""
	running := 0
	for i := range u.Agents {
		switch a := &u.Agents[i]; a.State {
		case StateFailed:
			if failed == "" {
				failed = a.Node + ": " + a.Error
			}
		case StateRunning:
			running++
			d.Actions = append(d.Actions, u.agentWork(a, now, d))
		}
	}
	switch {
	case failed != "" && running == 0:
		d.Actions = append(d.Actions, Action{ID: u.ID + "/fail/" + s.ID, Kind: ActFailStep, Upgrade: u.ID, Step: s.ID, Reason: failed})
		return
	case failed != "":
		return // the running ones finish; nothing new starts
	}
	pool := u.moltPool()
	if pool == "" {
		if running == 0 {
			d.Actions = append(d.Actions, actCompleteStep(u, s))
		}
		return
	}
	p, _ := u.Pool(pool)
	room := max(p.Concurrency, 1)
	for i := range u.Agents {
		if a := &u.Agents[i]; a.Pool == pool && a.State == StateRunning {
			room--
		}
	}
	for i := range u.Agents {
		a := &u.Agents[i]
		if room <= 0 {
			break
		}
		if a.Pool == pool && a.State == StatePending {
			d.Actions = append(d.Actions, Action{ID: fmt.Sprintf("%s/molt/%s/start/a%d", u.ID, a.Node, a.Attempt),
				Kind: ActStartAgent, Upgrade: u.ID, Step: StepIDMolt, Pool: a.Pool, Node: a.Node, Attempt: a.Attempt})
			room--
		}
	}
}

// agentWork is a running host's work, or its failure past the deadline.
func (u *Upgrade) agentWork(a *AgentTask, now time.Time, d *Decision) Action {
	if t := u.Options.AgentTimeout; t > 0 {
		deadline := a.StartedAt.Add(t)
		if !now.Before(deadline) {
			return Action{ID: fmt.Sprintf("%s/molt/%s/deadline/a%d", u.ID, a.Node, a.Attempt), Kind: ActFailAgent,
				Upgrade: u.ID, Step: StepIDMolt, Pool: a.Pool, Node: a.Node, Attempt: a.Attempt}
		}
		d.wake(deadline)
	}
	return Action{ID: u.AgentOperationID(a.Node, a.Attempt), Kind: ActUpdateAgent, Upgrade: u.ID, Step: StepIDMolt,
		Pool: a.Pool, Node: a.Node, Attempt: a.Attempt, Reason: u.Options.AgentVersion}
}

// moltPool is the pool whose hosts the molt step works on: the first, in
// the order of the pool steps, with a host not done ("" when all are).
func (u *Upgrade) moltPool() string {
	for i := range u.Steps {
		if u.Steps[i].Kind != StepPool {
			continue
		}
		for j := range u.Agents {
			if a := &u.Agents[j]; a.Pool == u.Steps[i].Pool && a.State != StateDone {
				return a.Pool
			}
		}
	}
	return ""
}

// runningMolt returns the molt step if it runs.
func (u *Upgrade) runningMolt() (*Step, error) {
	s, ok := u.Step(StepIDMolt)
	if !ok || s.State != StateRunning {
		return nil, stale("upgrade %s has no running molt step", u.ID)
	}
	return s, nil
}

// startAgent applies ActStartAgent: the host is the next of the molt
// step's current pool and the pool has room.
func (u *Upgrade) startAgent(act Action, now time.Time) error {
	if _, err := u.runningMolt(); err != nil {
		return err
	}
	a, ok := u.Agent(act.Node)
	if !ok || a.State != StatePending || a.Attempt != act.Attempt {
		return stale("agent of %s is not pending at attempt %d", act.Node, act.Attempt)
	}
	if u.failing() || u.moltPool() != a.Pool {
		return stale("agent of %s does not start now", act.Node)
	}
	p, _ := u.Pool(a.Pool)
	running := 0
	failed := false
	for i := range u.Agents {
		running += b2i(u.Agents[i].Pool == a.Pool && u.Agents[i].State == StateRunning)
		failed = failed || u.Agents[i].State == StateFailed
	}
	if failed || running >= max(p.Concurrency, 1) {
		return stale("pool %s has no room for another agent", a.Pool)
	}
	a.State, a.StartedAt, a.Error = StateRunning, now, ""
	return nil
}

// failAgent applies ActFailAgent: the host's new agent did not report
// within Options.AgentTimeout of the start.
func (u *Upgrade) failAgent(act Action, now time.Time) error {
	a, ok := u.Agent(act.Node)
	if !ok || a.State != StateRunning || a.Attempt != act.Attempt || u.Options.AgentTimeout <= 0 {
		return stale("agent of %s is not running at attempt %d with a deadline", act.Node, act.Attempt)
	}
	if now.Before(a.StartedAt.Add(u.Options.AgentTimeout)) {
		return stale("agent of %s: deadline not reached", act.Node)
	}
	a.State, a.FinishedAt = StateFailed, now
	a.Error = fmt.Sprintf("molt-agent %s did not report within %s (agent timeout)", u.Options.AgentVersion, u.Options.AgentTimeout)
	return nil
}

// failMolt applies ActFailStep to the molt step: a host failed and none
// runs. The step's message is the first failed host's reason.
func (u *Upgrade) failMolt(s *Step, now time.Time) error {
	reason := ""
	for i := range u.Agents {
		switch a := &u.Agents[i]; a.State {
		case StateRunning:
			return stale("agent of %s is running", a.Node)
		case StateFailed:
			if reason == "" {
				reason = fmt.Sprintf("agent of %s: %s", a.Node, a.Error)
			}
		}
	}
	if reason == "" {
		return stale("no agent failed")
	}
	s.State, s.FinishedAt, s.Message = StateFailed, now, reason
	return nil
}

// completeMolt applies ActCompleteStep to the molt step: every host runs
// the agent.
func (u *Upgrade) completeMolt(s *Step, now time.Time) error {
	for i := range u.Agents {
		if u.Agents[i].State != StateDone {
			return stale("agent of %s is %s", u.Agents[i].Node, u.Agents[i].State)
		}
	}
	s.State, s.FinishedAt = StateDone, now
	s.Message = fmt.Sprintf("%d agent(s) run molt-agent %s", len(u.Agents), u.Options.AgentVersion)
	return nil
}

// ApplyAgentResult records the end of a host's agent replacement. A result
// for another attempt, or for a host that is not running, is stale: it was
// applied, or the deadline failed the host first. A success names the
// release the new agent runs; one that is not the upgrade's fails the
// host.
func (u *Upgrade) ApplyAgentResult(r AgentResult, now time.Time) error {
	if r.Upgrade != u.ID || u.State != UpgradeRunning {
		return stale("result for %s, upgrade %s is %s", r.Upgrade, u.ID, u.State)
	}
	if _, err := u.runningMolt(); err != nil {
		return err
	}
	a, ok := u.Agent(r.Node)
	if !ok || a.State != StateRunning || a.Attempt != r.Attempt {
		return stale("agent of %s is not running at attempt %d", r.Node, r.Attempt)
	}
	a.FinishedAt, a.Version = now, r.Version
	switch {
	case !r.OK:
		a.State, a.Error = StateFailed, r.Message
	case r.Version != u.Options.AgentVersion:
		a.State, a.Error = StateFailed, fmt.Sprintf("the agent runs molt-agent %q after the update, not %s", r.Version, u.Options.AgentVersion)
	default:
		a.State = StateDone
	}
	u.Revision++
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// planMolt lays the molt step's hosts out in batches, pool after pool,
// each batch as wide as its pool's concurrency.
func planMolt(ps *PlannedStep, c *ClusterSpec, agents []AgentTask, dur Durations, begin time.Time) (length, minimal time.Duration) {
	at := begin
	for i := 0; i < len(agents); {
		p, _ := c.Pool(agents[i].Pool)
		width := max(p.Concurrency(), 1)
		b := Batch{Index: len(ps.Batches), Start: at, End: at.Add(dur.Agent)}
		for ; i < len(agents) && agents[i].Pool == p.Name && len(b.Nodes) < width; i++ {
			b.Nodes = append(b.Nodes, agents[i].Node)
		}
		ps.Batches = append(ps.Batches, b)
		at = b.End
	}
	ps.Disruption = "none for workloads: each host's molt-agent restarts; kubelet, containerd and pods keep running"
	return at.Sub(begin), at.Sub(begin)
}

// moltLeft is how long the molt step's hosts not done yet are expected
// to take, each pool's in batches of its concurrency.
func (u *Upgrade) moltLeft(agent time.Duration) time.Duration {
	left := map[string]int{}
	for i := range u.Agents {
		if u.Agents[i].State != StateDone {
			left[u.Agents[i].Pool]++
		}
	}
	var total time.Duration
	for pool, n := range left {
		width := 1
		if p, ok := u.Pool(pool); ok {
			width = max(p.Concurrency, 1)
		}
		total += time.Duration(ceilDiv(n, width)) * agent
	}
	return total
}
