package phases

import (
	"fmt"
	"slices"
	"time"
)

// Apply performs a commit action on u. It re-checks the action against the
// current state (optimistic concurrency): an action decided on a state that
// has moved on returns an error wrapping ErrStale and changes nothing.
// The FSM calls Apply; nothing here reads the clock, now is the time the
// leader stamped on the command.
func (u *Upgrade) Apply(a Action, now time.Time) error {
	if a.Upgrade != u.ID {
		return stale("action %s is for upgrade %s, not %s", a.ID, a.Upgrade, u.ID)
	}
	if u.State != UpgradeRunning {
		return stale("upgrade %s is %s", u.ID, u.State)
	}
	var err error
	switch a.Kind {
	case ActStartStep:
		err = u.startStep(a.Step, now)
	case ActCompleteStep:
		err = u.completeStep(a.Step, now)
	case ActStartNode:
		err = u.startNode(a, now)
	case ActPause:
		if u.PauseReason == a.Reason {
			return stale("already paused for %s", a.Reason)
		}
		u.PauseReason, u.PausedAt = a.Reason, now
	case ActResume:
		if u.PauseReason == "" {
			return stale("not paused")
		}
		u.PauseReason, u.PausedAt, u.ResumedAt = "", time.Time{}, now
	case ActFinish:
		for i := range u.Steps {
			if u.Steps[i].State != StateDone {
				return stale("step %s is %s", u.Steps[i].ID, u.Steps[i].State)
			}
		}
		u.State, u.FinishedAt, u.PauseReason = UpgradeDone, now, ""
	case ActPoolPhase:
		return u.advanceBlueGreen(a, now)
	case ActHaltStep:
		err = u.haltStep(a.Step, State(a.Reason), now)
	case ActHalt:
		if !u.stuck() {
			return stale("upgrade %s can still go on", u.ID)
		}
		u.State, u.FinishedAt, u.PauseReason = UpgradeCancelled, now, ""
		if u.failing() {
			u.State, u.Reason = UpgradeFailed, u.haltReason()
		}
	case ActFailPool:
		err = u.failPool(a.Pool)
	case ActFailStep:
		if s, ok := u.Step(a.Step); ok && s.Kind == StepMolt && s.State == StateRunning {
			err = u.failMolt(s, now)
			break
		}
		err = u.failHealth(a.Step, now)
	case ActStartAgent:
		err = u.startAgent(a, now)
	case ActFailAgent:
		err = u.failAgent(a, now)
	default:
		return fmt.Errorf("action kind %q is work, not a transition", a.Kind)
	}
	if err == nil {
		u.Revision++
	}
	return err
}

func (u *Upgrade) startStep(id string, now time.Time) error {
	s, ok := u.Step(id)
	if !ok {
		return stale("no step %s", id)
	}
	if s.State != StatePending {
		return stale("step %s is %s", id, s.State)
	}
	if !depsDone(u, s) {
		return stale("step %s: dependencies not done", id)
	}
	s.State, s.StartedAt = StateRunning, now
	if p, ok := u.Pool(s.Pool); ok && s.Kind == StepPool && p.BlueGreen != nil && p.BlueGreen.Phase == "" {
		p.BlueGreen.enter(PhaseCreatingGreen, now)
	}
	return nil
}

func (u *Upgrade) completeStep(id string, now time.Time) error {
	s, ok := u.Step(id)
	if !ok {
		return stale("no step %s", id)
	}
	if s.State == StateRunning && s.Kind == StepMolt {
		return u.completeMolt(s, now)
	}
	if s.State != StateRunning || s.Kind != StepPool {
		return stale("step %s is %s %s", id, s.Kind, s.State)
	}
	p, _ := u.Pool(s.Pool)
	if p.RollingBack {
		return stale("pool %s is rolling back", p.Name)
	}
	if p.BlueGreen != nil && p.BlueGreen.Phase != PhaseCompleted {
		return stale("pool %s is %s", p.Name, p.BlueGreen.Phase)
	}
	for _, n := range u.PoolNodes(p) {
		if n.State != StateDone {
			return stale("step %s: node %s is %s", id, n.Node, n.State)
		}
	}
	s.State, s.FinishedAt = StateDone, now
	return nil
}

// haltStep ends a pool step that will not go on by itself: cancelled with
// nothing in flight, or rolled back.
func (u *Upgrade) haltStep(id string, to State, now time.Time) error {
	s, ok := u.Step(id)
	if !ok || s.Kind != StepPool || s.State != StateRunning {
		return stale("no running pool step %s", id)
	}
	p, _ := u.Pool(s.Pool)
	nodes := u.PoolNodes(p)
	for i := range nodes {
		if nodes[i].State == StateRunning {
			return stale("step %s: node %s is running", id, nodes[i].Node)
		}
	}
	switch to {
	case StateCancelled:
		if !p.Cancelled && !u.failing() {
			return stale("pool %s is not cancelled", p.Name)
		}
	case StateFailed:
		if p.FailReason == "" || p.RollingBack {
			return stale("pool %s has not failed, or rolls back", p.Name)
		}
	case StateRolledBack:
		if bg := p.BlueGreen; bg != nil {
			if bg.Phase != PhaseRolledBack {
				return stale("pool %s is %s", p.Name, bg.Phase)
			}
		} else if !p.RollingBack || u.rollbackLeft(p) {
			return stale("pool %s has nodes to roll back", p.Name)
		}
	default:
		return stale("a step halts as cancelled or rolledBack, not %s", to)
	}
	s.State, s.FinishedAt = to, now
	return nil
}

func (u *Upgrade) startNode(a Action, now time.Time) error {
	n, ok := u.Node(a.Node)
	if !ok {
		return stale("no node %s", a.Node)
	}
	p, _ := u.Pool(n.Pool)
	s, _ := u.Step(PoolStepID(p.Name))
	if s.State != StateRunning {
		return stale("pool step %s is %s", s.ID, s.State)
	}
	if p.Cancelled {
		return stale("pool %s is cancelled", p.Name)
	}
	if !a.Rollback && p.BlueGreen == nil && u.failing() {
		return stale("upgrade %s is failing: nothing new starts", u.ID)
	}
	if n.Attempt != a.Attempt || n.Cursor != a.Cursor && !a.Rollback {
		return stale("node %s is at step %d attempt %d", a.Node, n.Cursor, n.Attempt)
	}
	switch {
	case a.Rollback:
		return u.startNodeRollback(p, n, a.Path, now)
	case p.BlueGreen != nil:
		return u.startBlueNode(p, n, now)
	case n.State != StatePending:
		return stale("node %s is %s", a.Node, n.State)
	case p.RollingBack:
		return stale("pool %s is rolling back", p.Name)
	case p.Strategy == StrategySurge:
		zone, surge, unavailable := surgeRoom(u, p)
		if n.Zone != zone || a.Path == PathMain && surge <= 0 || a.Path == PathUnavailable && unavailable <= 0 || a.Path == PathRollback {
			return stale("pool %s: no %s budget for node %s in zone %s", p.Name, pathName(a.Path), n.Node, n.Zone)
		}
		n.Path = a.Path
		if a.Path == PathMain {
			n.Replacement = ReplacementName(p.groupOf(n.Zone), u.ReplacementPurpose(false), n.Node)
		}
	default:
		if budget(u, p) <= 0 {
			return stale("pool %s has no budget left", p.Name)
		}
	}
	n.State, n.Cursor, n.StartedAt, n.StepStartedAt, n.Error = StateRunning, 0, now, now, ""
	return nil
}

// startBlueNode starts a blue node's cordon (CORDONING_BLUE_POOL) or, in
// its batch, its drain (DRAINING_BLUE_POOL).
func (u *Upgrade) startBlueNode(p *PoolTrack, n *NodeTask, now time.Time) error {
	bg := p.BlueGreen
	if n.State != StatePending {
		return stale("blue node %s is %s", n.Node, n.State)
	}
	switch {
	case bg.Phase == PhaseCordoningBlue && n.Cursor == 0:
		n.StartedAt = now
	case bg.Phase == PhaseDrainingBlue && n.Cursor == 1:
		i := slices.IndexFunc(u.PoolNodes(p), func(m NodeTask) bool { return m.Node == n.Node })
		if !bg.inBatch(i, bg.Batch) || bg.BatchSoakUntil.After(now) {
			return stale("blue node %s is not in the batch draining now", n.Node)
		}
	default:
		return stale("blue node %s at step %d does not start in %s", n.Node, n.Cursor, bg.Phase)
	}
	n.State, n.StepStartedAt, n.Error = StateRunning, now, ""
	return nil
}

// startNodeRollback starts taking a node of a rolling-back surge pool back
// to the From version on path.
func (u *Upgrade) startNodeRollback(p *PoolTrack, n *NodeTask, path int, now time.Time) error {
	if !u.needsRollback(p, n) {
		return stale("node %s needs no rollback", n.Node)
	}
	if p.Strategy == StrategySurge {
		zone, surge, unavailable := surgeRoom(u, p)
		if n.Zone != zone || path != rollbackPath(p, n) && !(path == PathUnavailable && rollbackPath(p, n) == PathMain) {
			return stale("node %s does not go back on %s now", n.Node, pathName(path))
		}
		if n.State == StateDone && (path == PathUnavailable && unavailable <= 0 || path != PathUnavailable && surge <= 0) {
			return stale("pool %s: no budget to roll node %s back", p.Name, n.Node)
		}
	} else if path != PathRollback || !u.nextInRollback(p, n) || forwardRunning(u, p) ||
		n.State == StateDone && budget(u, p) <= 0 || n.State == StateFailed && p.Concurrency-runningIn(u, p) <= 0 {
		return stale("pool %s: node %s does not go back on %s now", p.Name, n.Node, pathName(path))
	}
	n.Rollback, n.Path, n.Attempt = true, path, n.Attempt+1
	n.Replacement = ""
	if path == PathMain {
		n.Replacement = ReplacementName(p.groupOf(n.Zone), u.ReplacementPurpose(true), n.Node)
	} else if path == PathRollback {
		// The undo deletes the replacement made on the way forward.
		n.Replacement = ReplacementName(p.groupOf(n.Zone), u.ReplacementPurpose(false), n.Node)
	}
	n.State, n.Cursor, n.StartedAt, n.StepStartedAt, n.FinishedAt, n.Error = StateRunning, 0, now, now, time.Time{}, ""
	n.Waiting, n.RetryAt, n.RedGate, n.GreenSince = "", time.Time{}, "", time.Time{}
	return nil
}

func pathName(path int) string {
	return [...]string{"surge", "unavailable", "rollback"}[min(max(path, 0), 2)]
}

// NodeStepResult is the outcome of a node's work action (a cordon, drain,
// wait, or an agent operation), pinned to the cursor and attempt it was
// decided for.
type NodeStepResult struct {
	Upgrade    string
	Node       string
	Cursor     int
	Attempt    int
	OK         bool
	Message    string
	LeftBehind []LeftPod
	// Wait, when set, says the step could not run for a reason that
	// passes (no quota, no capacity in the zone, a red health gate): the
	// node stays at the step, reports the reason, and the step runs again
	// at RetryAt.
	Wait    string
	RetryAt time.Time
	// Drained lists the workloads whose pods a drain evicted.
	Drained []Workload
	// Gates are the checks a gates step observed; Apply judges them
	// (applyGates): RetryAt is then when to look again if the node waits.
	Gates []GateCheck
}

// ApplyNodeStepResult advances the node past a finished step, or marks it
// failed. A result for another cursor or attempt is stale: it was already
// applied, or belongs to an attempt that was superseded.
func (u *Upgrade) ApplyNodeStepResult(r NodeStepResult, now time.Time) error {
	if r.Upgrade != u.ID || u.State != UpgradeRunning {
		return stale("result for %s, upgrade %s is %s", r.Upgrade, u.ID, u.State)
	}
	n, ok := u.Node(r.Node)
	if !ok {
		return stale("no node %s", r.Node)
	}
	if n.State != StateRunning || n.Cursor != r.Cursor || n.Attempt != r.Attempt {
		return stale("node %s is %s at step %d attempt %d, result is for step %d attempt %d",
			n.Node, n.State, n.Cursor, n.Attempt, r.Cursor, r.Attempt)
	}
	p, _ := u.Pool(n.Pool)
	steps := p.steps(n.Path)
	ns := steps[n.Cursor]
	u.Revision++
	if ns.Kind == NodeGates {
		passed, failure := u.applyGates(n, p, r, now)
		switch {
		case failure != "":
			r.OK, r.Message = false, failure
		case !passed:
			return nil
		}
	} else if r.Wait != "" {
		n.Waiting, n.RetryAt = r.Wait, r.RetryAt
		return nil
	}
	n.Waiting, n.RetryAt, n.RedGate, n.GreenSince = "", time.Time{}, "", time.Time{}
	if c := ns.changes(); c != "" && !n.Rollback && u.Options.StepLayout >= StepLayoutGates {
		// Done or failed, the operation may have changed the component:
		// a rollback undoes it. (Upgrades laid out before had no
		// bare-metal rollback, and replay as they applied.)
		n.Applied = append(n.Applied, AppliedOp{Component: c, ID: u.OperationID(n.Node, n.Cursor, n.Attempt)})
	}
	if !r.OK {
		n.State, n.Error, n.FinishedAt = StateFailed, fmt.Sprintf("%s: %s", ns, r.Message), now
		return nil
	}
	switch ns.Kind {
	case NodeDrain:
		n.LeftBehind, n.Drained = r.LeftBehind, r.Drained
	case NodeWaitReady, NodeWaitReplacement:
		// The node's (or its replacement's) kubelet was seen Ready at
		// the target version: from here on it runs that version (SPEC
		// §3 rule 5 is checked on it).
		n.Version = u.TargetOf(n)
	case NodeDeleteInstance:
		// The old instance is gone: the replacement stands for the node.
		n.Current, n.Replacement = n.Replacement, ""
	case NodeUndoReplacement:
		n.Replacement = ""
		n.Version = u.From
	}
	n.Cursor++
	n.StepStartedAt = now
	switch {
	case n.Cursor == len(steps):
		n.State, n.FinishedAt = StateDone, now
	case p.BlueGreen != nil:
		// A cordoned blue node waits for its batch (BlueNodeSteps).
		n.State = StatePending
	}
	return nil
}

// StepResult is the outcome of a step's work (add-on manifests applied,
// health checks run), pinned to the step attempt it was decided for.
type StepResult struct {
	Upgrade string
	Step    string
	Attempt int
	OK      bool
	Message string
}

// ApplyStepResult finishes a non-pool step, or records a failed attempt to
// be retried after StepRetryInterval (health checks are retried until they
// pass, SPEC §4).
func (u *Upgrade) ApplyStepResult(r StepResult, now time.Time) error {
	if r.Upgrade != u.ID || u.State != UpgradeRunning {
		return stale("result for %s, upgrade %s is %s", r.Upgrade, u.ID, u.State)
	}
	s, ok := u.Step(r.Step)
	if !ok || s.Kind == StepPool {
		return stale("no runnable step %s", r.Step)
	}
	if s.State != StateRunning || s.Attempts != r.Attempt {
		return stale("step %s is %s attempt %d, result is for attempt %d", s.ID, s.State, s.Attempts, r.Attempt)
	}
	s.Message = r.Message
	s.FinishedAt = now
	if r.OK {
		s.State = StateDone
	} else {
		s.Attempts++
	}
	u.Revision++
	return nil
}

// RetryNode gives a failed node a new attempt at the step it failed on. The
// attempt number is part of every ID, so the agent sees a new operation.
func (u *Upgrade) RetryNode(name string, now time.Time) error {
	n, ok := u.Node(name)
	if !ok {
		return stale("no node %s", name)
	}
	if n.State != StateFailed {
		return stale("node %s is %s, not failed", name, n.State)
	}
	p, _ := u.Pool(n.Pool)
	if p.RollingBack && !n.Rollback {
		return stale("node %s: its pool is rolling back, and so will the node", name)
	}
	if u.failing() && !n.Rollback {
		return stale("node %s: upgrade %s fails (%s): nothing new starts; roll pools back or start a new upgrade", name, u.ID, u.failReason())
	}
	if p.MaxFailedNodes > 0 && p.Strategy != StrategySurge && !n.Rollback && budget(u, p) <= 0 {
		// The failed node is no longer under upgrade; a retry starts it
		// again within the pool's concurrency.
		return stale("node %s: pool %s has as many nodes under upgrade as it may", name, p.Name)
	}
	n.State, n.Attempt, n.Error, n.StepStartedAt, n.FinishedAt = StateRunning, n.Attempt+1, "", now, time.Time{}
	n.Waiting, n.RetryAt, n.RedGate, n.GreenSince = "", time.Time{}, "", time.Time{}
	u.Revision++
	return nil
}

// SetProtection records until when a node holds pods protected from
// eviction (zero: none).
func (u *Upgrade) SetProtection(node string, until time.Time) error {
	n, ok := u.Node(node)
	if !ok {
		return stale("no node %s", node)
	}
	if n.ProtectedUntil.Equal(until) {
		return nil
	}
	n.ProtectedUntil = until
	u.Revision++
	return nil
}

// Cancel ends the whole upgrade; nodes in flight are left where they are
// and reported. Used when an operator abandons an upgrade.
func (u *Upgrade) Cancel(now time.Time) error {
	if u.State != UpgradeRunning {
		return stale("upgrade %s is %s", u.ID, u.State)
	}
	u.State, u.FinishedAt = UpgradeCancelled, now
	u.Revision++
	return nil
}

// forwardRunning reports whether a node of the pool is on its way forward.
func forwardRunning(u *Upgrade, p *PoolTrack) bool {
	for _, n := range u.PoolNodes(p) {
		if n.State == StateRunning && !n.Rollback {
			return true
		}
	}
	return false
}

func runningIn(u *Upgrade, p *PoolTrack) int {
	k := 0
	for _, n := range u.PoolNodes(p) {
		if n.State == StateRunning {
			k++
		}
	}
	return k
}
