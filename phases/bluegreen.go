package phases

import (
	"fmt"
	"time"
)

// BlueGreenPhase is where a blue/green pool upgrade is. The first six are
// GKE's names (SPEC §7); COMPLETED and ROLLED_BACK are where it ends.
type BlueGreenPhase string

// Blue/green phases, in order; a rollback goes from any of the first four
// to ROLLBACK_STARTED and then ROLLED_BACK.
const (
	PhaseCreatingGreen   BlueGreenPhase = "CREATING_GREEN_POOL"
	PhaseCordoningBlue   BlueGreenPhase = "CORDONING_BLUE_POOL"
	PhaseDrainingBlue    BlueGreenPhase = "DRAINING_BLUE_POOL"
	PhaseSoaking         BlueGreenPhase = "NODE_POOL_SOAKING"
	PhaseDeletingBlue    BlueGreenPhase = "DELETING_BLUE_POOL"
	PhaseRollbackStarted BlueGreenPhase = "ROLLBACK_STARTED"
	// PhaseCompleted: the blue groups are deleted; the pool is the green
	// groups at the new version.
	PhaseCompleted BlueGreenPhase = "COMPLETED"
	// PhaseRolledBack: the green groups are deleted and blue uncordoned;
	// the pool runs the old version as before.
	PhaseRolledBack BlueGreenPhase = "ROLLED_BACK"
)

// Pool work of blue/green: what the coordinator does in a phase through
// the cloud adapter and the cluster's API server, once per attempt
// (Action.Reason of an ActRunPoolWork).
const (
	// WorkCreateGreen checks quota, makes the template of the target
	// release, creates one green group per zone as large as blue's,
	// pins the blue groups' autoscaling (and green's, until the soak) and
	// waits until every green Node is Ready at the target version.
	WorkCreateGreen = "createGreen"
	// WorkReleaseGreen lets the autoscaler size the green groups (the
	// pool's autoscaling range), from the soak on.
	WorkReleaseGreen = "releaseGreen"
	// WorkDeleteBlue deletes the pods left on blue nodes (not evicted:
	// PDBs do not hold them; grace capped at DeleteBlueGracePeriod), then
	// the blue groups and their Nodes, and lets the autoscaler size green
	// (as WorkReleaseGreen, when the soak was skipped).
	WorkDeleteBlue = "deleteBlue"
	// WorkRollback uncordons blue, gives its groups their autoscaling
	// back and deletes the green groups and their Nodes.
	WorkRollback = "rollback"
)

// BlueGreenTrack is a blue/green pool's progress. The blue nodes are the
// pool's NodeTasks (BlueNodeSteps: cordon, then drain with their batch);
// the green nodes are listed in Green once created.
type BlueGreenTrack struct {
	Phase          BlueGreenPhase
	PhaseStartedAt time.Time
	// Attempt counts tries of the phase's pool work (reset at each
	// phase); Message is the latest outcome. Waiting says why the work
	// waits (no quota, no capacity) and RetryAt when it is tried again.
	Attempt int
	Message string
	Waiting string
	RetryAt time.Time
	// BatchSize, BatchSoak and PoolSoak are the settings when the upgrade
	// started (BatchSize 0: no draining phase).
	BatchSize int
	BatchSoak time.Duration
	PoolSoak  time.Duration
	// Batch counts the batches drained; the next batch starts at
	// BatchSoakUntil.
	Batch          int
	BatchSoakUntil time.Time
	// Soaked is the soak scheduled so far (batch soaks, then the pool
	// soak), never more than MaxTotalSoak; SoakUntil ends the pool soak.
	Soaked    time.Duration
	SoakUntil time.Time
	// Completed is set by the complete command: the soak ends now.
	Completed bool
	// GreenScalable is set once the autoscaler may size green (the soak).
	GreenScalable bool
	// Green are the green groups and their nodes, once created.
	Green []GreenGroup
	// RollbackFrom is the phase a rollback started in.
	RollbackFrom BlueGreenPhase
}

// GreenGroup is a green instance group and its nodes.
type GreenGroup struct {
	Zone  string
	Name  string
	Nodes []string
}

func newBlueGreenTrack(s *BlueGreenSettings, nodes int) *BlueGreenTrack {
	return &BlueGreenTrack{BatchSize: s.BatchSize(nodes), BatchSoak: s.BatchSoakDuration(), PoolSoak: s.PoolSoak()}
}

// batches is how many drain batches a pool of n blue nodes has.
func (b *BlueGreenTrack) batches(n int) int {
	if b.BatchSize <= 0 {
		return 0
	}
	return ceilDiv(n, b.BatchSize)
}

// inBatch reports whether the i-th blue node drains in batch k.
func (b *BlueGreenTrack) inBatch(i, k int) bool {
	return b.BatchSize > 0 && i/b.BatchSize == k
}

// soakBudget is what is left of MaxTotalSoak.
func (b *BlueGreenTrack) soakBudget() time.Duration { return max(MaxTotalSoak-b.Soaked, 0) }

// workOf is the pool work a phase runs ("" when its work is node steps or
// waiting).
func (b *BlueGreenTrack) workOf() string {
	switch b.Phase {
	case PhaseCreatingGreen:
		return WorkCreateGreen
	case PhaseSoaking:
		if !b.GreenScalable {
			return WorkReleaseGreen
		}
	case PhaseDeletingBlue:
		return WorkDeleteBlue
	case PhaseRollbackStarted:
		return WorkRollback
	}
	return ""
}

// decideBlueGreen is Decide for a running blue/green pool step.
func decideBlueGreen(u *Upgrade, s *Step, p *PoolTrack, now time.Time, gate Gate, d *Decision) {
	bg := p.BlueGreen
	nodes := u.PoolNodes(p)
	running, failed := 0, 0
	for i := range nodes {
		switch n := &nodes[i]; n.State {
		case StateRunning:
			running++
			d.Actions = append(d.Actions, actNodeStep(u, n, p.NodeSteps[n.Cursor]))
		case StateFailed:
			failed++
		}
	}
	switch bg.Phase {
	case PhaseCompleted:
		d.Actions = append(d.Actions, actCompleteStep(u, s))
		return
	case PhaseRolledBack:
		d.Actions = append(d.Actions, actHaltStep(u, s, StateRolledBack))
		return
	}
	if p.Cancelled {
		if running == 0 {
			d.Actions = append(d.Actions, actHaltStep(u, s, StateCancelled))
		}
		return
	}
	if failed > 0 && bg.Phase != PhaseRollbackStarted {
		return // an operator retries the node, or rolls back
	}
	if u.failing() && bg.Phase != PhaseDeletingBlue && bg.Phase != PhaseRollbackStarted {
		// Another pool failed: nothing new starts anywhere; the pool
		// stops in its phase once nothing of it runs.
		if running == 0 {
			d.Actions = append(d.Actions, actHaltStep(u, s, StateCancelled))
		}
		return
	}
	if bg.Phase != PhaseDeletingBlue && bg.Phase != PhaseRollbackStarted {
		// Deleting blue is not pausable, and a rollback restores service.
		t, _ := s.Target()
		if ok, reason := gate.Allow(t); !ok {
			d.block(reason)
			return
		}
	}
	if work := bg.workOf(); work != "" {
		if bg.RetryAt.After(now) {
			d.wake(bg.RetryAt)
		} else {
			d.Actions = append(d.Actions, actPoolWork(u, p, work))
		}
	}
	switch bg.Phase {
	case PhaseCordoningBlue:
		cordoned := 0
		for i := range nodes {
			n := &nodes[i]
			switch {
			case n.State == StatePending && n.Cursor == 0:
				d.Actions = append(d.Actions, actStartNode(u, n, PathMain))
			case n.State == StatePending || n.State == StateDone:
				cordoned++
			}
		}
		if cordoned == len(nodes) {
			next := PhaseDrainingBlue
			if bg.batches(len(nodes)) == 0 {
				next = soakOrDelete(bg)
			}
			d.Actions = append(d.Actions, actPoolPhase(u, p, next, 0))
		}
	case PhaseDrainingBlue:
		if bg.BatchSoakUntil.After(now) {
			d.wake(bg.BatchSoakUntil)
			return
		}
		if bg.Batch >= bg.batches(len(nodes)) {
			d.Actions = append(d.Actions, actPoolPhase(u, p, soakOrDelete(bg), bg.Batch))
			return
		}
		done, size := 0, 0
		for i := range nodes {
			if !bg.inBatch(i, bg.Batch) {
				continue
			}
			size++
			switch n := &nodes[i]; n.State {
			case StatePending:
				d.Actions = append(d.Actions, actStartNode(u, n, PathMain))
			case StateDone:
				done++
			}
		}
		if done == size {
			d.Actions = append(d.Actions, actPoolPhase(u, p, PhaseDrainingBlue, bg.Batch))
		}
	case PhaseSoaking:
		if bg.Completed || !now.Before(bg.SoakUntil) {
			d.Actions = append(d.Actions, actPoolPhase(u, p, PhaseDeletingBlue, 0))
		} else {
			d.wake(bg.SoakUntil)
		}
	}
}

// soakOrDelete is where a pool goes after its last batch: the soak, or
// straight to deleting blue once the soaking reached MaxTotalSoak.
func soakOrDelete(bg *BlueGreenTrack) BlueGreenPhase {
	if bg.soakBudget() == 0 {
		return PhaseDeletingBlue
	}
	return PhaseSoaking
}

// advanceBlueGreen applies an ActPoolPhase: the pool moves to phase to,
// or (to == DRAINING_BLUE_POOL while draining) finishes batch at. Every
// precondition is checked again on the state it lands on.
func (u *Upgrade) advanceBlueGreen(a Action, now time.Time) error {
	p, _, err := u.runningPool(a.Pool)
	if err != nil {
		return err
	}
	bg := p.BlueGreen
	if bg == nil {
		return stale("pool %s is not blue/green", a.Pool)
	}
	if p.Cancelled {
		return stale("pool %s is paused", a.Pool)
	}
	to := BlueGreenPhase(a.Phase)
	nodes := u.PoolNodes(p)
	switch {
	case bg.Phase == PhaseCordoningBlue && (to == PhaseDrainingBlue || to == PhaseSoaking || to == PhaseDeletingBlue):
		for i := range nodes {
			if n := &nodes[i]; n.State != StateDone && (n.State != StatePending || n.Cursor < 1) {
				return stale("blue node %s is not cordoned yet", n.Node)
			}
		}
		if (to == PhaseDrainingBlue) != (bg.batches(len(nodes)) > 0) {
			return stale("pool %s: %s does not follow cordoning with %d batches", a.Pool, to, bg.batches(len(nodes)))
		}
	case bg.Phase == PhaseDrainingBlue && to == PhaseDrainingBlue:
		if a.Attempt != bg.Batch || bg.Batch >= bg.batches(len(nodes)) {
			return stale("pool %s: batch %d is not the one draining (%d)", a.Pool, a.Attempt, bg.Batch)
		}
		for i := range nodes {
			if bg.inBatch(i, bg.Batch) && nodes[i].State != StateDone {
				return stale("blue node %s of batch %d is %s", nodes[i].Node, bg.Batch, nodes[i].State)
			}
		}
		soak := min(bg.BatchSoak, bg.soakBudget())
		bg.Batch++
		bg.Soaked += soak
		bg.BatchSoakUntil = now.Add(soak)
		u.Revision++
		return nil
	case bg.Phase == PhaseDrainingBlue && (to == PhaseSoaking || to == PhaseDeletingBlue):
		if bg.Batch < bg.batches(len(nodes)) || bg.BatchSoakUntil.After(now) {
			return stale("pool %s: batches left or soaking", a.Pool)
		}
	case bg.Phase == PhaseSoaking && to == PhaseDeletingBlue:
		if !bg.Completed && now.Before(bg.SoakUntil) {
			return stale("pool %s soaks until %s", a.Pool, bg.SoakUntil.Format(time.RFC3339))
		}
	default:
		return stale("pool %s: no move from %s to %s", a.Pool, bg.Phase, to)
	}
	if to == PhaseSoaking {
		soak := min(bg.PoolSoak, bg.soakBudget())
		bg.Soaked += soak
		bg.SoakUntil = now.Add(soak)
	}
	bg.enter(to, now)
	u.Revision++
	return nil
}

func (bg *BlueGreenTrack) enter(phase BlueGreenPhase, now time.Time) {
	bg.Phase, bg.PhaseStartedAt = phase, now
	bg.Attempt, bg.Message, bg.Waiting, bg.RetryAt = 0, "", "", time.Time{}
}

// PoolWorkResult is the outcome of a pool's work (blue/green's createGreen,
// releaseGreen, deleteBlue, rollback), pinned to the phase and attempt it
// was decided for.
type PoolWorkResult struct {
	Upgrade string
	Pool    string
	Work    string
	Phase   BlueGreenPhase
	Attempt int
	OK      bool
	Message string
	// Wait, when set, says the work could not run for a reason that
	// passes (quota, capacity): it is tried again at RetryAt, and the
	// pool reports the reason; it is not a failure.
	Wait    string
	RetryAt time.Time
	// Green are the green groups createGreen made, with their nodes.
	Green []GreenGroup
}

// ApplyPoolWorkResult records the outcome of a pool's work: the phase it
// finishes moves on, a wait is recorded, a failure is retried after
// StepRetryInterval.
func (u *Upgrade) ApplyPoolWorkResult(r PoolWorkResult, now time.Time) error {
	if r.Upgrade != u.ID {
		return stale("result for %s, upgrade is %s", r.Upgrade, u.ID)
	}
	p, _, err := u.runningPool(r.Pool)
	if err != nil {
		return err
	}
	bg := p.BlueGreen
	if bg == nil || bg.Phase != r.Phase || bg.Attempt != r.Attempt || bg.workOf() != r.Work {
		return stale("pool %s: result of %s in %s attempt %d does not match", r.Pool, r.Work, r.Phase, r.Attempt)
	}
	u.Revision++
	switch {
	case r.Wait != "":
		bg.Waiting, bg.RetryAt, bg.Message = r.Wait, r.RetryAt, r.Message
		return nil
	case !r.OK:
		bg.Attempt++
		bg.Message, bg.Waiting, bg.RetryAt = r.Message, "", now.Add(StepRetryInterval)
		return nil
	}
	bg.Message = r.Message
	switch r.Work {
	case WorkCreateGreen:
		bg.Green = r.Green
		bg.enter(PhaseCordoningBlue, now)
	case WorkReleaseGreen:
		bg.GreenScalable = true
		bg.Attempt, bg.Waiting, bg.RetryAt = 0, "", time.Time{}
	case WorkDeleteBlue:
		nodes := u.PoolNodes(p)
		for i := range nodes {
			nodes[i].State, nodes[i].FinishedAt = StateDone, now
		}
		bg.enter(PhaseCompleted, now)
	case WorkRollback:
		nodes := u.PoolNodes(p)
		for i := range nodes {
			n := &nodes[i]
			n.State, n.Cursor, n.Attempt, n.LeftBehind, n.FinishedAt = StatePending, 0, n.Attempt+1, nil, time.Time{}
		}
		bg.enter(PhaseRolledBack, now)
	default:
		return fmt.Errorf("unknown pool work %q", r.Work)
	}
	return nil
}

// GreenNodes lists the green nodes of a blue/green pool.
func (b *BlueGreenTrack) GreenNodes() []Node {
	var out []Node
	for _, g := range b.Green {
		for _, n := range g.Nodes {
			out = append(out, Node{Name: n, Zone: g.Zone})
		}
	}
	return out
}
