package phases

import (
	"fmt"
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
		err = u.startNode(a.Node, a.Attempt, now)
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
	return nil
}

func (u *Upgrade) completeStep(id string, now time.Time) error {
	s, ok := u.Step(id)
	if !ok {
		return stale("no step %s", id)
	}
	if s.State != StateRunning || s.Kind != StepPool {
		return stale("step %s is %s %s", id, s.Kind, s.State)
	}
	p, _ := u.Pool(s.Pool)
	for _, n := range u.PoolNodes(p) {
		if n.State != StateDone {
			return stale("step %s: node %s is %s", id, n.Node, n.State)
		}
	}
	s.State, s.FinishedAt = StateDone, now
	return nil
}

func (u *Upgrade) startNode(name string, attempt int, now time.Time) error {
	n, ok := u.Node(name)
	if !ok {
		return stale("no node %s", name)
	}
	if n.State != StatePending || n.Attempt != attempt {
		return stale("node %s is %s (attempt %d)", name, n.State, n.Attempt)
	}
	p, _ := u.Pool(n.Pool)
	s, _ := u.Step(PoolStepID(p.Name))
	if s.State != StateRunning {
		return stale("pool step %s is %s", s.ID, s.State)
	}
	if p.Cancelled {
		return stale("pool %s is cancelled", p.Name)
	}
	if budget(u, p) <= 0 {
		return stale("pool %s has no budget left", p.Name)
	}
	n.State, n.Cursor, n.StartedAt, n.StepStartedAt, n.Error = StateRunning, 0, now, now, ""
	return nil
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
	ns := p.NodeSteps[n.Cursor]
	if !r.OK {
		n.State, n.Error, n.FinishedAt = StateFailed, fmt.Sprintf("%s: %s", ns, r.Message), now
		u.Revision++
		return nil
	}
	if ns.Kind == NodeDrain {
		n.LeftBehind = r.LeftBehind
	}
	if ns.Kind == NodeWaitReady {
		// The node's kubelet was seen Ready at the target version: from
		// here on it runs the new version (SPEC §3 rule 5 is checked on it).
		n.Version = u.To
	}
	n.Cursor++
	n.StepStartedAt = now
	if n.Cursor == len(p.NodeSteps) {
		n.State, n.FinishedAt = StateDone, now
	}
	u.Revision++
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
	n.State, n.Attempt, n.Error, n.StepStartedAt, n.FinishedAt = StateRunning, n.Attempt+1, "", now, time.Time{}
	u.Revision++
	return nil
}

// SetPoolCancelled cancels (true) or resumes (false) a pool: a cancelled
// pool starts no new node; nodes already started finish (SPEC §7).
func (u *Upgrade) SetPoolCancelled(pool string, cancelled bool) error {
	p, ok := u.Pool(pool)
	if !ok {
		return stale("no pool %s", pool)
	}
	if p.Cancelled == cancelled {
		return stale("pool %s cancelled is already %v", pool, cancelled)
	}
	p.Cancelled = cancelled
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
