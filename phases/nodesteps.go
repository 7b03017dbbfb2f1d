package phases

import (
	"fmt"
	"time"
)

// NodeStepKind is one step of a node's upgrade. Bare-metal in-place upgrades
// and the MIG strategies compose the same kinds (cordon, drain, wait Ready,
// uncordon) in different orders, with instance steps for MIGs.
type NodeStepKind string

// Node step kinds. The first group is shared by every strategy.
const (
	NodeCordon    NodeStepKind = "cordon"
	NodeDrain     NodeStepKind = "drain"
	NodeOperation NodeStepKind = "operation" // an agent operation (OpSpec)
	NodeWaitReady NodeStepKind = "waitReady"
	NodeUncordon  NodeStepKind = "uncordon"
	// For MIG-backed pools (SPEC §7): surge creates a replacement before the
	// old node goes; unavailable recreates it in place.
	NodeCreateReplacement NodeStepKind = "createReplacement"
	NodeDeleteInstance    NodeStepKind = "deleteInstance"
	NodeRecreateInstance  NodeStepKind = "recreateInstance"
	// NodeWaitReplacement waits until the replacement's Node is Ready at
	// the target version (NodeWaitReady waits for the node itself).
	NodeWaitReplacement NodeStepKind = "waitReplacement"
	// NodeUndoReplacement rolls back a surge node that was not replaced
	// yet: its replacement is deleted and the node uncordoned.
	NodeUndoReplacement NodeStepKind = "undoReplacement"
	// NodeGates checks the node's health gates (SPEC §16): its agent
	// healthy, the workloads its drain evicted back to their desired ready
	// replicas, and the pool's and cluster's PromQL gates holding for
	// their time. A red gate holds the pool (the step waits, with the gate
	// and its last value) until Options.GateTimeout, then fails the node.
	NodeGates NodeStepKind = "gates"
)

// OpKind is the kind of agent operation a node step dispatches. The values
// are the agent API's operation kinds.
type OpKind string

// Agent operation kinds used by upgrades.
const (
	OpImportImages      OpKind = "ImportImages"
	OpUpgradeStaticPods OpKind = "UpgradeStaticPods"
	OpUpgradeBinary     OpKind = "UpgradeBinary"
	// OpRollback undoes the operation that changed a component
	// (OpSpec.Component) on the node's way forward (NodeTask.Applied).
	OpRollback OpKind = "Rollback"
)

// OpSpec says what an operation does; the coordinator fills in artifacts
// (URLs, checksums, manifests) from the release catalog when it hands the
// operation to the agent.
type OpSpec struct {
	Kind      OpKind
	Component string // kubelet | containerd for binaries
}

// NodeStep is one entry of a pool's node step list.
type NodeStep struct {
	Kind NodeStepKind
	Op   *OpSpec
}

func (s NodeStep) String() string {
	if s.Op != nil {
		if s.Op.Component != "" {
			return fmt.Sprintf("%s:%s:%s", s.Kind, s.Op.Kind, s.Op.Component)
		}
		return fmt.Sprintf("%s:%s", s.Kind, s.Op.Kind)
	}
	return string(s.Kind)
}

// BareMetalNodeSteps is the in-place upgrade of a node with this role
// (SPEC §6): cordon, drain, images, static pods where the role runs them,
// containerd, kubelet, wait Ready at the new version, uncordon.
func BareMetalNodeSteps(role Role) []NodeStep {
	steps := []NodeStep{
		{Kind: NodeCordon},
		{Kind: NodeDrain},
		{Kind: NodeOperation, Op: &OpSpec{Kind: OpImportImages}},
	}
	if role != RoleWorker {
		steps = append(steps, NodeStep{Kind: NodeOperation, Op: &OpSpec{Kind: OpUpgradeStaticPods}})
	}
	steps = append(steps,
		NodeStep{Kind: NodeOperation, Op: &OpSpec{Kind: OpUpgradeBinary, Component: "containerd"}},
		NodeStep{Kind: NodeOperation, Op: &OpSpec{Kind: OpUpgradeBinary, Component: "kubelet"}},
		NodeStep{Kind: NodeWaitReady},
		NodeStep{Kind: NodeUncordon},
	)
	return steps
}

// SurgeNodeSteps is the node step list every MIG pool got in upgrades laid
// out before StepLayoutMIG; kept so their logs replay.
func SurgeNodeSteps() []NodeStep {
	return []NodeStep{
		{Kind: NodeCreateReplacement},
		{Kind: NodeWaitReady},
		{Kind: NodeCordon},
		{Kind: NodeDrain},
		{Kind: NodeDeleteInstance},
	}
}

// NodeTask is one node's upgrade: a cursor over its pool's node steps.
// Steps before Cursor are done, the one at Cursor is running (when State is
// running) and the rest wait.
type NodeTask struct {
	Node  string
	Pool  string
	State State
	// Cursor indexes the pool's NodeSteps.
	Cursor int
	// Attempt counts retries after a failure; it is part of every action
	// and operation ID so a retry is a new operation for the agent.
	Attempt int
	// Version is what the node's kubelet runs as far as molt knows: the
	// upgrade's From until wait-Ready at the new version passes.
	Version       Version
	StartedAt     time.Time
	StepStartedAt time.Time
	FinishedAt    time.Time
	// ProtectedUntil is when the last pod protected from eviction on this
	// node (safe-to-evict=false, SPEC §8) becomes evictable. Automatic
	// upgrades do such nodes last and do not start them before.
	ProtectedUntil time.Time
	// LeftBehind lists pods the drain left behind (best effort, SPEC §6).
	LeftBehind []LeftPod
	Error      string

	// Zone is the node's zone (a MIG pool's nodes go zone by zone).
	Zone string
	// Path is which of its pool's node step lists the node follows
	// (PathMain: NodeSteps; PathUnavailable: UnavailableSteps), chosen
	// when it starts.
	Path int
	// Replacement is the instance a surge replaces the node with (a
	// deterministic name, ReplacementName), set when the node starts on
	// the main path of a surge pool and cleared once the node it
	// replaces is deleted.
	Replacement string
	// Current is the instance that stands for the node once a surge
	// replaced it (empty: the node itself). Live returns it.
	Current string
	// Rollback is set while the node goes back to the upgrade's From
	// version (a pool rollback), and stays set once it did.
	Rollback bool
	// Waiting says why the node's current step waits (no quota, no
	// capacity in the zone, a red health gate, gates soaking), and RetryAt
	// when it is tried again; the node is not failed.
	Waiting string
	RetryAt time.Time
	// Applied lists the agent operations that changed the node's
	// components on its way forward (done or failed), which a rollback
	// undoes.
	Applied []AppliedOp
	// Drained lists the workloads whose pods the node's drain evicted; its
	// gates wait for them to be back.
	Drained []Workload
	// RedGate names the check that was red when the node's gates step
	// last looked ("" when none): the node waits, and its pool starts no
	// other node (SPEC §16). Waiting says the gate's last value.
	RedGate string
	// GreenSince is when every check of the node's gates step last turned
	// green; the node passes once they held for its pool's GateSoak.
	GreenSince time.Time
}

// Node paths (NodeTask.Path).
const (
	PathMain        = 0
	PathUnavailable = 1
	// PathRollback follows the pool's RollbackSteps.
	PathRollback = 2
)

// Live is the name of the machine that stands for the node now: the
// surge replacement that took its place, or the node itself.
func (n *NodeTask) Live() string {
	if n.Current != "" {
		return n.Current
	}
	return n.Node
}

// LeftPod is a pod a drain did not remove before its deadline.
type LeftPod struct {
	Namespace   string
	Name        string
	Reason      string // pdb | terminating | protected
	EvictableAt time.Time
}
