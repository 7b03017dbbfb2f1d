package phases

import "fmt"

// ActionKind is what the coordinator should do for a decision.
type ActionKind string

// Action kinds. Commit actions are state transitions the coordinator
// appends to the Raft log as they are (see Apply). Work actions need I/O
// (the cluster's API server, an agent); the coordinator runs each once per
// ID and commits its outcome as a NodeStepResult or StepResult.
const (
	ActStartStep    ActionKind = "startStep"
	ActCompleteStep ActionKind = "completeStep"
	ActStartNode    ActionKind = "startNode"
	ActPause        ActionKind = "pause"
	ActResume       ActionKind = "resume"
	ActFinish       ActionKind = "finish"

	// ActPoolPhase moves a blue/green pool to its next phase (Phase), or
	// closes a drained batch (Phase DRAINING_BLUE_POOL, Attempt the batch).
	ActPoolPhase ActionKind = "poolPhase"
	// ActHaltStep ends a pool step that will not go on by itself: it was
	// cancelled and nothing of it is in flight (Reason "cancelled"), or
	// its rollback finished (Reason "rolledBack").
	ActHaltStep ActionKind = "haltStep"
	// ActHalt ends an upgrade that cannot go on: nothing runs, nothing
	// may start, and a pool step was cancelled or rolled back. The
	// upgrade is cancelled: another may start, and a resume or rollback
	// of its pool opens it again.
	ActHalt ActionKind = "halt"
	// ActFailPool records that a pool reached its failure budget
	// (PoolTrack.FailReason): nothing new starts in the upgrade, and a
	// pool whose policy is RollbackAuto starts rolling back.
	ActFailPool ActionKind = "failPool"
	// ActFailStep fails the final health step after Options.HealthTimeout.
	ActFailStep ActionKind = "failStep"

	ActRunNodeStep ActionKind = "runNodeStep"
	ActDispatch    ActionKind = "dispatch"
	ActRunStep     ActionKind = "runStep"
	// ActRunPoolWork is a blue/green pool's work in its phase (Reason:
	// WorkCreateGreen, WorkReleaseGreen, WorkDeleteBlue, WorkRollback).
	ActRunPoolWork ActionKind = "runPoolWork"
)

// Action is one decision. ID is deterministic: the same state yields the
// same IDs, so a repeated tick, or a new leader, cannot start the same work
// under a different name.
type Action struct {
	ID      string
	Kind    ActionKind
	Upgrade string
	Step    string
	Pool    string
	Node    string
	// Cursor and Attempt pin a node action to the node step it was decided
	// for; for step actions Attempt pins the step attempt.
	Cursor   int
	Attempt  int
	NodeStep NodeStep
	Reason   string
	// Path is the node step list a started node follows (NodeTask.Path).
	Path int
	// Rollback marks a node start or node step that takes the node back
	// to the upgrade's From version.
	Rollback bool
	// Phase is the blue/green phase an ActPoolPhase moves to, or the
	// phase an ActRunPoolWork works in.
	Phase string
}

// Commits reports whether the action is a state transition to append to
// the log (as opposed to work to run).
func (a Action) Commits() bool {
	switch a.Kind {
	case ActStartStep, ActCompleteStep, ActStartNode, ActPause, ActResume, ActFinish, ActPoolPhase, ActHaltStep, ActHalt, ActFailPool, ActFailStep,
		ActStartAgent, ActFailAgent:
		return true
	}
	return false
}

func (a Action) String() string { return a.ID }

func actStartStep(u *Upgrade, s *Step) Action {
	return Action{ID: u.ID + "/start/" + s.ID, Kind: ActStartStep, Upgrade: u.ID, Step: s.ID}
}

func actCompleteStep(u *Upgrade, s *Step) Action {
	return Action{ID: u.ID + "/complete/" + s.ID, Kind: ActCompleteStep, Upgrade: u.ID, Step: s.ID}
}

func actRunStep(u *Upgrade, s *Step) Action {
	return Action{ID: fmt.Sprintf("%s/run/%s/a%d", u.ID, s.ID, s.Attempts), Kind: ActRunStep, Upgrade: u.ID, Step: s.ID, Attempt: s.Attempts}
}

func actStartNode(u *Upgrade, n *NodeTask, path int) Action {
	id := fmt.Sprintf("%s/%s/start/a%d", u.ID, n.Node, n.Attempt)
	if path != PathMain {
		id += fmt.Sprintf("/p%d", path)
	}
	if n.Cursor > 0 {
		// A blue node resuming at its drain after the pool's cordon.
		id += fmt.Sprintf("/c%d", n.Cursor)
	}
	return Action{ID: id, Kind: ActStartNode, Upgrade: u.ID, Pool: n.Pool, Node: n.Node, Cursor: n.Cursor, Attempt: n.Attempt, Path: path}
}

// actStartRollback starts taking a node back to the upgrade's From
// version on path; the attempt moves on, so nothing decided for the
// node's way forward can apply to its way back.
func actStartRollback(u *Upgrade, n *NodeTask, path int) Action {
	return Action{ID: fmt.Sprintf("%s/%s/rollback/start/a%d/p%d", u.ID, n.Node, n.Attempt+1, path), Kind: ActStartNode, Upgrade: u.ID,
		Pool: n.Pool, Node: n.Node, Attempt: n.Attempt, Path: path, Rollback: true}
}

func actNodeStep(u *Upgrade, n *NodeTask, ns NodeStep) Action {
	kind := ActRunNodeStep
	if ns.Kind == NodeOperation {
		kind = ActDispatch
	}
	id := u.OperationID(n.Node, n.Cursor, n.Attempt)
	if n.Rollback {
		id = u.RollbackOperationID(n.Node, n.Cursor, n.Attempt)
	}
	return Action{ID: id, Kind: kind, Upgrade: u.ID, Pool: n.Pool,
		Node: n.Node, Cursor: n.Cursor, Attempt: n.Attempt, NodeStep: ns, Path: n.Path, Rollback: n.Rollback}
}

func actHaltStep(u *Upgrade, s *Step, to State) Action {
	return Action{ID: fmt.Sprintf("%s/halt/%s/%s", u.ID, s.ID, to), Kind: ActHaltStep, Upgrade: u.ID, Step: s.ID, Reason: string(to)}
}

func actPoolWork(u *Upgrade, p *PoolTrack, work string) Action {
	bg := p.BlueGreen
	return Action{ID: fmt.Sprintf("%s/pool/%s/%s/a%d", u.ID, p.Name, work, bg.Attempt), Kind: ActRunPoolWork, Upgrade: u.ID,
		Pool: p.Name, Attempt: bg.Attempt, Reason: work, Phase: string(bg.Phase)}
}

func actPoolPhase(u *Upgrade, p *PoolTrack, to BlueGreenPhase, batch int) Action {
	return Action{ID: fmt.Sprintf("%s/pool/%s/phase/%s/%d", u.ID, p.Name, to, batch), Kind: ActPoolPhase, Upgrade: u.ID,
		Pool: p.Name, Attempt: batch, Phase: string(to)}
}
