package api

import (
	"strconv"
	"strings"
)

// The names an upgrade's progress is told in, as the wire spells them, so
// that a client (moltctl, the end-to-end tests, a script) reads an Upgrade
// without importing the engine. Each equals its engine twin (package
// phases); api/convert's tests pin that.

// Step kinds (Step.Kind).
const (
	StepKindPool      StepKind = "pool"
	StepKindAddons    StepKind = "addons"
	StepKindLifecycle StepKind = "lifecycle"
	StepKindHealth    StepKind = "health"
	StepKindBackup    StepKind = "backup"
)

// The IDs of the steps that are not a pool's (Step.ID); a pool's step is
// PoolStepID(pool).
const (
	StepIDAddons    = "addons"
	StepIDLifecycle = "lifecycle"
	StepIDHealth    = "health"
	StepIDBackup    = "backup"
)

// IsBackupOperationID says whether an operation ID is the etcd snapshot
// of an upgrade's backup step ("<upgrade>/run/backup/a<attempt>"): a
// cluster step's operation, not a node's. The engine's twin is
// phases.ParseBackupOperationID (api/convert's tests pin that they agree).
func IsBackupOperationID(id string) bool {
	parts := strings.Split(id, "/")
	if len(parts) != 4 || parts[1] != "run" || parts[2] != StepIDBackup {
		return false
	}
	a, ok := strings.CutPrefix(parts[3], "a")
	n, err := strconv.Atoi(a)
	return ok && err == nil && n >= 0 && a == strconv.Itoa(n)
}

// PoolStepID is the ID of the step that upgrades a pool.
func PoolStepID(pool string) string { return "pool/" + pool }

// Node step kinds (NodeStep.Kind). A NodeTask's Step is the kind, followed
// for an operation by ":" and the operation's kind and component
// ("operation:UpgradeBinary:kubelet").
const (
	NodeStepCordon            NodeStepKind = "cordon"
	NodeStepDrain             NodeStepKind = "drain"
	NodeStepOperation         NodeStepKind = "operation"
	NodeStepWaitReady         NodeStepKind = "waitReady"
	NodeStepUncordon          NodeStepKind = "uncordon"
	NodeStepCreateReplacement NodeStepKind = "createReplacement"
	NodeStepDeleteInstance    NodeStepKind = "deleteInstance"
	NodeStepRecreateInstance  NodeStepKind = "recreateInstance"
	NodeStepWaitReplacement   NodeStepKind = "waitReplacement"
	NodeStepUndoReplacement   NodeStepKind = "undoReplacement"
	NodeStepGates             NodeStepKind = "gates"
)

// MIG pool strategies (PoolTrack.Strategy, UpgradeSettings.Strategy).
const (
	StrategySurge     = "surge"
	StrategyBlueGreen = "blueGreen"
)

// Blue/green phases (BlueGreenTrack.Phase and RollbackFrom), GKE's names.
const (
	BlueGreenCreatingGreen   = "CREATING_GREEN_POOL"
	BlueGreenCordoningBlue   = "CORDONING_BLUE_POOL"
	BlueGreenDrainingBlue    = "DRAINING_BLUE_POOL"
	BlueGreenSoaking         = "NODE_POOL_SOAKING"
	BlueGreenDeletingBlue    = "DELETING_BLUE_POOL"
	BlueGreenRollbackStarted = "ROLLBACK_STARTED"
	BlueGreenCompleted       = "COMPLETED"
	BlueGreenRolledBack      = "ROLLED_BACK"
)

// Pool commands: the last segment of POST
// /v1/clusters/{name}/pools/{pool}/upgrade/{command}.
const (
	PoolCancel   = "cancel"
	PoolResume   = "resume"
	PoolRollback = "rollback"
	PoolComplete = "complete"
)

// Cloud adapters (CloudSpec.Provider).
const (
	CloudGCE = "gce"
	CloudLab = "lab"
)

// PauseMaintenanceWindow is the PauseReason of an automatic upgrade that
// its maintenance window's end paused.
const PauseMaintenanceWindow = "MAINTENANCE_WINDOW"

// Pool returns the upgrade's pool named name.
func (u *Upgrade) Pool(name string) (*PoolTrack, bool) {
	for i := range u.Pools {
		if u.Pools[i].Name == name {
			return &u.Pools[i], true
		}
	}
	return nil, false
}

// PoolNodes returns the pool's nodes (a slice of Nodes); none when p's
// First and Count do not fit Nodes.
func (u *Upgrade) PoolNodes(p *PoolTrack) []NodeTask {
	if p.First < 0 || p.Count < 0 || p.First+p.Count > len(u.Nodes) {
		return nil
	}
	return u.Nodes[p.First : p.First+p.Count]
}

// Node returns the upgrade's task of the node named name.
func (u *Upgrade) Node(name string) (*NodeTask, bool) {
	for i := range u.Nodes {
		if u.Nodes[i].Node == name {
			return &u.Nodes[i], true
		}
	}
	return nil, false
}

// Step returns the upgrade's step with this ID.
func (u *Upgrade) Step(id string) (*Step, bool) {
	for i := range u.Steps {
		if u.Steps[i].ID == id {
			return &u.Steps[i], true
		}
	}
	return nil, false
}

// String is the node step as a NodeTask's Step names it: the kind, and for
// an operation its kind and component ("operation:UpgradeBinary:kubelet").
func (s NodeStep) String() string {
	if s.Op == nil {
		return string(s.Kind)
	}
	if s.Op.Component != "" {
		return string(s.Kind) + ":" + string(s.Op.Kind) + ":" + s.Op.Component
	}
	return string(s.Kind) + ":" + string(s.Op.Kind)
}

// StepsOf returns the node step list n follows in its pool p (n.Path:
// nodeSteps, unavailableSteps or rollbackSteps).
func (p *PoolTrack) StepsOf(n *NodeTask) []NodeStep {
	switch n.Path {
	case 1:
		return p.UnavailableSteps
	case 2:
		return p.RollbackSteps
	}
	return p.NodeSteps
}
