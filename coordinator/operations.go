package coordinator

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
)

// materialize turns a dispatch decision into the agent operation, filling
// artifacts from the release catalog. When the release has nothing for the
// step (no image archives, no static-pod images, no binary), it returns a
// reason instead, and the step completes without bothering the agent.
func materialize(a phases.Action, rel *api.Release, to phases.Version) (api.Operation, string) {
	op := api.Operation{ID: a.ID}
	spec := a.NodeStep.Op
	if rel == nil || spec == nil {
		return op, "no release entry for " + to.String()
	}
	switch spec.Kind {
	case phases.OpImportImages:
		if len(rel.Components.Images) == 0 {
			return op, "release has no image archives to import"
		}
		op.Kind = api.OpImportImages
		op.ImportImages = &api.ImportImages{Archives: rel.Components.Images}
	case phases.OpUpgradeStaticPods:
		if len(rel.Components.StaticPods) == 0 {
			return op, "release has no static-pod images"
		}
		op.Kind = api.OpUpgradeStaticPods
		op.UpgradeStaticPods = &api.UpgradeStaticPods{Version: to.String(), Images: rel.Components.StaticPods}
	case phases.OpUpgradeBinary:
		art := rel.Components.Kubelet
		if spec.Component == string(api.ComponentContainerd) {
			art = rel.Components.Containerd
		}
		if art.URL == "" {
			return op, "release has no " + spec.Component + " artifact"
		}
		version := to.KubeletVersion()
		if spec.Component == string(api.ComponentContainerd) {
			version = art.Version
			if version == "" {
				version = "release-" + to.String()
			}
		}
		op.Kind = api.OpUpgradeBinary
		op.UpgradeBinary = &api.UpgradeBinary{Component: api.Component(spec.Component), Version: version, URL: art.URL, SHA256: art.SHA256}
	default:
		return op, fmt.Sprintf("unknown operation kind %q", spec.Kind)
	}
	return op, ""
}

// rollbackOp is the agent operation of a rollback step (SPEC §16): undo
// the operation that changed the step's component on the node's way
// forward (phases.NodeTask.Applied), from the copy the agent kept. When no
// operation changed it there is nothing to undo, and the step completes
// without the agent.
func rollbackOp(a phases.Action, u *phases.Upgrade) (api.Operation, string) {
	op := api.Operation{ID: a.ID}
	n, ok := u.Node(a.Node)
	if !ok {
		return op, "no node " + a.Node
	}
	target, ok := n.AppliedOpOf(a.NodeStep.Op.Component)
	if !ok {
		return op, "nothing to undo: no operation changed " + a.NodeStep.Op.Component + " on " + a.Node
	}
	op.Kind = api.OpRollback
	op.Rollback = &api.Rollback{OperationID: target}
	return op, ""
}

// parseOperationID splits "<upgrade>/<node>/<cursor>/a<attempt>", and the
// rollback form "<upgrade>/<node>/rollback/<cursor>/a<attempt>"
// (phases.Upgrade.RollbackOperationID).
func parseOperationID(id string) (upgrade, node string, cursor, attempt int, ok bool) {
	parts := strings.Split(id, "/")
	if len(parts) == 5 && parts[2] == "rollback" {
		parts = append(parts[:2], parts[3:]...)
	}
	if len(parts) != 4 || !strings.HasPrefix(parts[3], "a") {
		return "", "", 0, 0, false
	}
	cur, err1 := strconv.Atoi(parts[2])
	att, err2 := strconv.Atoi(parts[3][1:])
	if err1 != nil || err2 != nil {
		return "", "", 0, 0, false
	}
	return parts[0], parts[1], cur, att, true
}

// ReportResult records an agent's result for an operation. Running reports
// are not committed (the agent's journal has them); a final result advances
// the node. A result already applied, or for a superseded attempt, is
// acknowledged and ignored, so agents may report as often as they like.
func (c *Coordinator) ReportResult(ctx context.Context, cluster, node string, r api.OperationResult) error {
	if r.State == api.OpRunning {
		return nil
	}
	if err := checkResultLimits(r); err != nil {
		return err
	}
	if r.State != api.OpSucceeded && r.State != api.OpFailed {
		return &RuleError{Rule: "operation-state", Detail: fmt.Sprintf("state %q is not running, succeeded or failed", r.State), Err: ErrInvalid}
	}
	if strings.HasPrefix(r.ID, "preflight-") {
		return c.reportPreflightResult(ctx, cluster, node, r)
	}
	if _, _, _, ok := parseAgentOperationID(r.ID); ok {
		return c.reportAgentResult(ctx, cluster, node, r)
	}
	if _, _, ok := phases.ParseBackupOperationID(r.ID); ok {
		return c.reportBackupResult(ctx, cluster, node, r)
	}
	upgrade, opNode, cursor, attempt, ok := parseOperationID(r.ID)
	if !ok || opNode != node {
		return &RuleError{Rule: "operation-id", Detail: fmt.Sprintf("operation %q is not an upgrade operation of node %s", r.ID, node), Err: ErrNotFound}
	}
	if !c.sm.KnownUpgrade(cluster, upgrade) {
		return &RuleError{Rule: "operation-id", Detail: fmt.Sprintf("cluster %s has no upgrade %s", cluster, upgrade), Err: ErrNotFound}
	}
	res := phases.NodeStepResult{Upgrade: upgrade, Node: node, Cursor: cursor, Attempt: attempt, OK: r.State == api.OpSucceeded, Message: r.Message}
	cmd := statemachine.NodeStepResultCmd{Cluster: cluster, Result: res, Now: c.cfg.Clock.Now()}
	if err := c.sm.Precheck(cmd); err != nil {
		if isStale(err) {
			return nil // already applied, or for a superseded attempt: acknowledged
		}
		return err
	}
	v, err := c.apply(ctx, cmd)
	if isStale(err) {
		return nil
	}
	if err == nil {
		if c.cfg.Recorder != nil {
			c.cfg.Recorder.AgentOperation(string(r.Kind), string(r.State))
		}
		c.observeNode(cluster, v)
	}
	return err
}

// PollOperations is an agent's long poll for its work. Offers live in the
// leader's memory: on a member that does not lead, or stops leading while
// the poll waits, it returns at once with an error wrapping
// raftstore.ErrNotLeader (HTTP 503 not-leader), and the agent asks again,
// at the leader.
func (c *Coordinator) PollOperations(ctx context.Context, cluster, node string, wait time.Duration) ([]api.Operation, error) {
	resp, err := c.PollAgent(ctx, cluster, node, wait)
	return resp.Operations, err
}

// PollAgent is PollOperations answering as the agent endpoint does: each
// operation names the upgrade it belongs to (api.Operation.Upgrade), and
// the answer names the cluster's upgrade in progress, "" for none
// (api.OperationsResponse.Upgrade), read from the replicated state after
// the wait, so that it is as new as the operations. The agent keeps the
// artifacts an upgrade's preflight verified until it learns the upgrade
// ended.
func (c *Coordinator) PollAgent(ctx context.Context, cluster, node string, wait time.Duration) (api.OperationsResponse, error) {
	if err := c.checkAgent(cluster, node); err != nil {
		return api.OperationsResponse{}, err
	}
	ops, err := c.dispatch.poll(ctx, cluster, node, wait)
	if err != nil {
		return api.OperationsResponse{}, fmt.Errorf("poll of %s/%s: %w", cluster, node, err)
	}
	upgrade, run := c.sm.PendingUpgradeID(cluster)
	for i := range ops { // ops is the poll's own copy
		ops[i].Upgrade = operationUpgrade(ops[i].ID, upgrade, run)
	}
	return api.OperationsResponse{Operations: ops, Upgrade: &upgrade}, nil
}

// operationUpgrade is the upgrade an operation belongs to: the one its ID
// names (parseOperationID), or, for a check of a preflight run, the
// pending upgrade when that waits (or waited) for the run. The IDs say
// it, so nothing needs to be stored with the operations, and the
// preflight run's operations are decided before its upgrade has an ID.
func operationUpgrade(id, pending, run string) string {
	if upgrade, _, _, _, ok := parseOperationID(id); ok {
		return upgrade
	}
	if upgrade, _, _, ok := parseAgentOperationID(id); ok {
		return upgrade
	}
	if upgrade, _, ok := phases.ParseBackupOperationID(id); ok {
		return upgrade
	}
	if run != "" && strings.HasPrefix(id, "preflight-"+run+"-") {
		return pending
	}
	return ""
}

// observeNode records a node upgrade that the committed result v (the
// node's task after it, see state.nodeStepResult) finished or failed.
func (c *Coordinator) observeNode(cluster string, v any) {
	n, ok := v.(phases.NodeTask)
	if c.cfg.Recorder == nil || !ok {
		return
	}
	switch {
	case n.State != phases.StateDone && n.State != phases.StateFailed:
	case n.Rollback:
		c.cfg.Recorder.NodeRolledBack(cluster, n.Pool, n.State == phases.StateDone)
	default:
		c.cfg.Recorder.NodeUpgraded(cluster, n.Pool, n.FinishedAt.Sub(n.StartedAt), n.State == phases.StateDone)
	}
}
