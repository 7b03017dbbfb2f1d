package phases

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
)

// Failure budget, rollback policy and health gates (SPEC §16).

// Rollback policies of a pool (UpgradeSettings.Rollback).
const (
	// RollbackManual (the default): a pool past its failure budget fails;
	// an operator may roll it back.
	RollbackManual = "manual"
	// RollbackAuto: a pool past its failure budget rolls the nodes it
	// upgraded back at once. Never for control-plane pools.
	RollbackAuto = "auto"
	// RollbackNever: a pool past its failure budget fails and cannot be
	// rolled back.
	RollbackNever = "never"
)

// DefaultMaxFailedNodes is a pool's failure budget when unset: the first
// failed node fails the pool.
const DefaultMaxFailedNodes = 1

// Bounds of health gates.
const (
	MaxHealthGates   = 16
	MaxGateExprLen   = 4096
	MaxGateFor       = time.Hour
	maxGateURLLength = 1024
)

// Names of the checks every node's gates step makes besides the PromQL
// gates (GateCheck.Name). A PromQL gate may not take one of these names.
const (
	// CheckNodeReady: the node (or the instance that replaced it) is
	// Ready with its kubelet at the version it goes to.
	CheckNodeReady = "node-ready"
	// CheckAgent: the node's agent reports and is healthy.
	CheckAgent = "agent"
	// CheckWorkloads: the controllers whose pods the node's drain evicted
	// are back to their desired ready replicas.
	CheckWorkloads = "workloads"
)

// HealthGate is a PromQL expression that must hold after each node of a
// pool before the pool goes on, queried from the Prometheus at URL
// (`/api/v1/query`). It holds while the query returns a non-empty result
// — `sum(rate(probe_failures_total[1m])) == 0` holds while nothing fails
// — and must hold for For (together with the node's other gates) before
// the node passes.
type HealthGate struct {
	Name       string
	Expr       string
	For        time.Duration
	Prometheus string
}

func validateGates(where string, gates []HealthGate) error {
	if len(gates) > MaxHealthGates {
		return invalid("health-gates", "%s: %d health gates; at most %d", where, len(gates), MaxHealthGates)
	}
	names := map[string]bool{}
	for _, g := range gates {
		if !DNSLabel(g.Name) || names[g.Name] || g.Name == CheckNodeReady || g.Name == CheckAgent || g.Name == CheckWorkloads {
			return invalid("health-gates", "%s: health gate name %q must be a unique DNS label other than %s, %s and %s",
				where, g.Name, CheckNodeReady, CheckAgent, CheckWorkloads)
		}
		names[g.Name] = true
		if strings.TrimSpace(g.Expr) == "" || len(g.Expr) > MaxGateExprLen {
			return invalid("health-gates", "%s: health gate %s needs an expression of at most %d bytes", where, g.Name, MaxGateExprLen)
		}
		if g.For < 0 || g.For > MaxGateFor {
			return invalid("health-gates", "%s: health gate %s: for is %s; it must be 0s..%s", where, g.Name, g.For, MaxGateFor)
		}
		u, err := url.Parse(g.Prometheus)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(g.Prometheus) > maxGateURLLength {
			return invalid("health-gates", "%s: health gate %s: prometheus %q is not an http(s) URL", where, g.Name, g.Prometheus)
		}
	}
	return nil
}

func (s UpgradeSettings) validateHealth(p *Pool) error {
	if s.MaxFailedNodes != nil && (*s.MaxFailedNodes < 1 || *s.MaxFailedNodes > len(p.Nodes)) {
		return invalid("max-failed-nodes", "pool %s: maxFailedNodes %d is outside 1..%d (its nodes)", p.Name, *s.MaxFailedNodes, len(p.Nodes))
	}
	if s.Strategy == StrategyBlueGreen && (s.MaxFailedNodes != nil || s.Rollback == RollbackAuto) {
		return invalid("max-failed-nodes", "pool %s: a blue/green pool has no failure budget and no automatic rollback (it halts at a failed node; roll it back with its command)", p.Name)
	}
	switch s.Rollback {
	case "", RollbackManual, RollbackNever:
	case RollbackAuto:
		if p.Role == RoleControlPlane || p.Role == RoleControlPlaneLB {
			return invalid("rollback-policy", "pool %s: control-plane pools never roll back automatically (rollback auto)", p.Name)
		}
	default:
		return invalid("rollback-policy", "pool %s: rollback %q is not auto, manual or never", p.Name, s.Rollback)
	}
	return validateGates("pool "+p.Name, s.HealthGates)
}

// FailureBudget is the pool's maxFailedNodes with its default.
func (s UpgradeSettings) FailureBudget() int {
	if s.MaxFailedNodes == nil {
		return DefaultMaxFailedNodes
	}
	return *s.MaxFailedNodes
}

// RollbackPolicy is the pool's rollback policy with its default.
func (s UpgradeSettings) RollbackPolicy() string {
	if s.Rollback == "" {
		return RollbackManual
	}
	return s.Rollback
}

// Components an agent operation changes (OpSpec.Component; static pods
// have none on the way forward).
const (
	ComponentKubelet    = "kubelet"
	ComponentContainerd = "containerd"
	ComponentStaticPods = "staticPods"
)

// BareMetalRollbackSteps take an in-place node back to the version before
// the upgrade: cordon, drain, the agent undoes the operations that changed
// the kubelet, containerd and (where the role runs them) the static-pod
// manifests — the reverse of their order on the way forward, each undo
// restoring the copy the agent kept, nothing where no operation changed
// the component — then Ready at the old version, uncordon.
func BareMetalRollbackSteps(role Role) []NodeStep {
	steps := []NodeStep{
		{Kind: NodeCordon},
		{Kind: NodeDrain},
		{Kind: NodeOperation, Op: &OpSpec{Kind: OpRollback, Component: ComponentKubelet}},
		{Kind: NodeOperation, Op: &OpSpec{Kind: OpRollback, Component: ComponentContainerd}},
	}
	if role != RoleWorker {
		steps = append(steps, NodeStep{Kind: NodeOperation, Op: &OpSpec{Kind: OpRollback, Component: ComponentStaticPods}})
	}
	return append(steps, NodeStep{Kind: NodeWaitReady}, NodeStep{Kind: NodeUncordon})
}

// AppliedOp is an agent operation that ran on a node (done or failed) and
// may have changed a component: what a rollback undoes.
type AppliedOp struct {
	// Component is kubelet, containerd or staticPods.
	Component string
	ID        string
}

// Workload is a controller whose pods a drain evicted from a node; the
// node's gates wait until it is back to its desired ready replicas.
type Workload struct {
	// Kind is Deployment, StatefulSet, ReplicaSet or
	// ReplicationController.
	Kind      string
	Namespace string
	Name      string
}

// GateCheck is one check of a node's gates step as the coordinator
// observed it: a built-in check (CheckNodeReady, CheckAgent,
// CheckWorkloads) or a PromQL gate, whether it holds, and its last value
// (the query's result, or what is short).
type GateCheck struct {
	Name  string
	OK    bool
	Value string
}

// layoutHealth adds what StepLayoutGates brings to a pool's track: the
// gates step at the end of each forward path, the failure budget, the
// rollback policy and steps, the gates.
func layoutHealth(t *PoolTrack, p *Pool, c *ClusterSpec) {
	t.RollbackPolicy = p.Settings.RollbackPolicy()
	if t.BlueGreen != nil {
		// Blue/green soaks the whole pool: its nodes have no gates step,
		// and a failed blue node halts the pool as before (no budget).
		return
	}
	t.MaxFailedNodes = p.Settings.FailureBudget()
	t.Gates = append(append([]HealthGate(nil), c.HealthGates...), p.Settings.HealthGates...)
	t.NodeSteps = append(t.NodeSteps, NodeStep{Kind: NodeGates})
	if t.UnavailableSteps != nil {
		t.UnavailableSteps = append(t.UnavailableSteps, NodeStep{Kind: NodeGates})
	}
	if t.Backing != BackingMIG {
		t.RollbackSteps = BareMetalRollbackSteps(p.Role)
	}
}

// GateSoak is how long a node's gates must all hold before it passes: the
// longest For of the pool's gates (0 without PromQL gates).
func (p *PoolTrack) GateSoak() time.Duration {
	var soak time.Duration
	for _, g := range p.Gates {
		soak = max(soak, g.For)
	}
	return soak
}

// changes is the component an agent operation step changes on a node's way
// forward ("" for steps that change none, or undo).
func (s NodeStep) changes() string {
	if s.Op == nil {
		return ""
	}
	switch s.Op.Kind {
	case OpUpgradeBinary:
		return s.Op.Component
	case OpUpgradeStaticPods:
		return ComponentStaticPods
	}
	return ""
}

// AppliedOpOf is the last operation that changed component on the node's
// way forward, which a rollback step undoes; false when none did.
func (n *NodeTask) AppliedOpOf(component string) (string, bool) {
	for i := len(n.Applied) - 1; i >= 0; i-- {
		if n.Applied[i].Component == component {
			return n.Applied[i].ID, true
		}
	}
	return "", false
}

// applyGates judges a node's gates step from what the coordinator
// observed (r.Gates; a result without checks that is not OK counts as one
// red check named after the step). A red check holds the node, and with it
// the pool (NodeTask.RedGate), until Options.GateTimeout after the step
// started; then the node fails. Once every check holds, the node passes
// when they have held together for the pool's GateSoak; a red check on
// the way starts the soak again. It returns whether the node passed, and
// the failure message when it failed.
func (u *Upgrade) applyGates(n *NodeTask, p *PoolTrack, r NodeStepResult, now time.Time) (passed bool, failure string) {
	red := slices.IndexFunc(r.Gates, func(g GateCheck) bool { return !g.OK })
	var name, value string
	switch {
	case red >= 0:
		name, value = r.Gates[red].Name, r.Gates[red].Value
	case !r.OK:
		name, value = string(NodeGates), r.Message
	}
	if name != "" {
		n.GreenSince, n.RedGate = time.Time{}, name
		reason := fmt.Sprintf("gate %s red: %s", name, value)
		if t := u.Options.GateTimeout; t > 0 && !now.Before(n.StepStartedAt.Add(t)) {
			return false, fmt.Sprintf("%s, still after the %s gate deadline", reason, t)
		}
		n.Waiting, n.RetryAt = reason, r.RetryAt
		return false, ""
	}
	n.RedGate = ""
	if n.GreenSince.IsZero() {
		n.GreenSince = now
	}
	soak := p.GateSoak()
	if held := now.Sub(n.GreenSince); held < soak {
		n.Waiting = fmt.Sprintf("gates green for %s of %s", held.Round(time.Second), soak)
		n.RetryAt = r.RetryAt
		if until := n.GreenSince.Add(soak); n.RetryAt.IsZero() || until.Before(n.RetryAt) {
			n.RetryAt = until
		}
		return false, ""
	}
	return true, ""
}

// failReason says why the upgrade fails ("" when it does not): the first
// pool past its budget, or a failed step's message.
func (u *Upgrade) failReason() string {
	for i := range u.Pools {
		if r := u.Pools[i].FailReason; r != "" {
			return "pool " + u.Pools[i].Name + ": " + r
		}
	}
	for i := range u.Steps {
		if u.Steps[i].State == StateFailed && u.Steps[i].Kind != StepPool {
			return "step " + u.Steps[i].ID + ": " + u.Steps[i].Message
		}
	}
	return ""
}

// failing reports whether the upgrade stops starting anything: a pool
// reached its failure budget, or a step failed.
func (u *Upgrade) failing() bool { return u.failReason() != "" }

// Failing reports whether nothing new may start in the upgrade because a
// pool reached its failure budget or a step failed; FailReason says which.
func (u *Upgrade) Failing() bool { return u.failing() }

// FailReason is why the upgrade fails or failed ("" when it does not).
func (u *Upgrade) FailReason() string { return u.failReason() }

// failPool applies ActFailPool: the pool reached its failure budget.
func (u *Upgrade) failPool(pool string) error {
	p, _, err := u.runningPool(pool)
	if err != nil {
		return err
	}
	if p.MaxFailedNodes == 0 || p.FailReason != "" || p.RollingBack {
		return stale("pool %s has no failure budget, already failed, or rolls back", pool)
	}
	var failed []string
	for _, n := range u.PoolNodes(p) {
		if n.State == StateFailed && !n.Rollback {
			failed = append(failed, n.Node+" ("+n.Error+")")
		}
	}
	if len(failed) < p.MaxFailedNodes {
		return stale("pool %s: %d failed nodes, budget %d", pool, len(failed), p.MaxFailedNodes)
	}
	p.FailReason = fmt.Sprintf("%d of %d nodes failed, its failure budget is %d (maxFailedNodes): %s",
		len(failed), p.Count, p.MaxFailedNodes, strings.Join(failed, "; "))
	if p.RollbackPolicy == RollbackAuto && p.Role != RoleControlPlane && p.Role != RoleControlPlaneLB {
		p.RollingBack = true
	}
	return nil
}

// failHealth applies ActFailStep: the final health step did not pass
// within Options.HealthTimeout.
func (u *Upgrade) failHealth(id string, now time.Time) error {
	s, ok := u.Step(id)
	if !ok || s.Kind != StepHealth || s.State != StateRunning || u.Options.HealthTimeout <= 0 || s.Attempts == 0 {
		return stale("no running health step %s with a deadline", id)
	}
	if now.Before(s.StartedAt.Add(u.Options.HealthTimeout)) {
		return stale("health step %s: deadline not reached", id)
	}
	s.State, s.FinishedAt = StateFailed, now
	s.Message = fmt.Sprintf("did not pass within %s (health timeout); last attempt: %s", u.Options.HealthTimeout, s.Message)
	return nil
}

// haltReason is the Reason of an upgrade that ends failed: why it failed,
// and which pools were rolled back.
func (u *Upgrade) haltReason() string {
	reason := u.failReason()
	var back []string
	for i := range u.Steps {
		if s := &u.Steps[i]; s.Kind == StepPool && s.State == StateRolledBack {
			back = append(back, s.Pool)
		}
	}
	if len(back) > 0 {
		reason += "; rolled back: " + strings.Join(back, ", ")
	}
	return reason
}

// rollbackOrder is the order an in-place pool's nodes go back in: the
// reverse of the order they started in (the last started first), the
// reverse of the pool's order among nodes that started together.
func rollbackOrder(nodes []NodeTask) []int {
	idx := make([]int, len(nodes))
	for i := range idx {
		idx[i] = len(nodes) - 1 - i
	}
	sort.SliceStable(idx, func(a, b int) bool { return nodes[idx[a]].StartedAt.After(nodes[idx[b]].StartedAt) })
	return idx
}

// rollbackSkew refuses taking a control-plane pool back while a node of
// another pool runs the new version: kubelets are never newer than the
// control plane (SPEC §3 rule 5).
func (u *Upgrade) rollbackSkew(p *PoolTrack) error {
	if p.Role != RoleControlPlane {
		return nil
	}
	for i := range u.Pools {
		o := &u.Pools[i]
		if o.Name == p.Name {
			continue
		}
		if k := u.PoolVersionCounts(o)[u.To]; k > 0 && u.To != u.From {
			return refuse("rollback-skew", "pool %s: %d node(s) of pool %s run %s; the control plane cannot go back below a kubelet (roll pool %s back first)",
				p.Name, k, o.Name, u.To, o.Name)
		}
	}
	return nil
}
