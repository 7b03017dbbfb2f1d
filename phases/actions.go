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

	ActRunNodeStep ActionKind = "runNodeStep"
	ActDispatch    ActionKind = "dispatch"
	ActRunStep     ActionKind = "runStep"
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
}

// Commits reports whether the action is a state transition to append to
// the log (as opposed to work to run).
func (a Action) Commits() bool {
	switch a.Kind {
	case ActStartStep, ActCompleteStep, ActStartNode, ActPause, ActResume, ActFinish:
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

func actStartNode(u *Upgrade, n *NodeTask) Action {
	return Action{ID: fmt.Sprintf("%s/%s/start/a%d", u.ID, n.Node, n.Attempt), Kind: ActStartNode, Upgrade: u.ID,
		Pool: n.Pool, Node: n.Node, Attempt: n.Attempt}
}

func actNodeStep(u *Upgrade, n *NodeTask, ns NodeStep) Action {
	kind := ActRunNodeStep
	if ns.Kind == NodeOperation {
		kind = ActDispatch
	}
	return Action{ID: u.OperationID(n.Node, n.Cursor, n.Attempt), Kind: kind, Upgrade: u.ID, Pool: n.Pool,
		Node: n.Node, Cursor: n.Cursor, Attempt: n.Attempt, NodeStep: ns}
}
