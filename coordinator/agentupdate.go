package coordinator

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/internal/version"
	"github.com/moltproject/molt/phases"
)

// Agents that update themselves: the coordinator's side of an upgrade's
// molt step (phases/molt.go decides it) and the skew policy that says
// which agent releases a coordinator serves.

// withAgents adds what the molt step needs to an upgrade's options when
// the upgrade is laid out with one (phases.StepLayoutMolt, which the
// capability gate allows only once every member reads it) and the target
// release names a molt-agent: that release, the agent timeout, and the
// release each of the cluster's agents last said it runs.
//
// The agents' releases are the leader's memory of their registrations
// and beats (liveness), not replicated state: the entry that starts the
// upgrade carries them, and the upgrade keeps each host's (AgentTask.From)
// and which hosts its molt step updates, so every member replays the same
// step from the log. A host nobody heard from is updated all the same.
func (c *Coordinator) withAgents(o phases.Options, cluster string, to phases.Version) phases.Options {
	if o.StepLayout < phases.StepLayoutMolt {
		return o
	}
	rel, ok := c.sm.Release(to.String())
	if !ok || rel.Agent == nil {
		return o
	}
	r, err := c.sm.Cluster(cluster)
	if err != nil {
		return o
	}
	o.AgentVersion, o.AgentTimeout = rel.Agent.Version, c.cfg.AgentTimeout
	o.AgentVersions = map[string]string{}
	for _, p := range r.Spec.Pools {
		for _, n := range p.Nodes {
			if v := c.live.version(nodeKey(cluster, n.Name)); v != "" {
				o.AgentVersions[n.Name] = v
			}
		}
	}
	return o
}

// agentOp is the operation of a molt step's ActUpdateAgent: the target
// release's molt-agent. A release that names none (it was replaced in
// the catalog after the upgrade started) gives a reason instead.
func agentOp(a phases.Action, rel *api.Release) (api.Operation, string) {
	if rel == nil || rel.Agent == nil || rel.Agent.Version != a.Reason {
		return api.Operation{}, fmt.Sprintf("the release no longer names molt-agent %s", a.Reason)
	}
	return api.Operation{ID: a.ID, Kind: api.OpUpdateAgent, UpdateAgent: &api.UpdateAgent{
		Version: rel.Agent.Version, URL: rel.Agent.URL, SHA256: rel.Agent.SHA256}}, ""
}

// commitAgentResult commits the end of a host's agent replacement.
func (c *Coordinator) commitAgentResult(ctx context.Context, cluster string, r phases.AgentResult) error {
	cmd := statemachine.AgentResultCmd{Cluster: cluster, Result: r, Now: c.cfg.Clock.Now()}
	if err := c.sm.Precheck(cmd); err != nil {
		if isStale(err) {
			return nil // applied already, or the deadline came first: acknowledged
		}
		return err
	}
	_, err := c.apply(ctx, cmd)
	if isStale(err) {
		return nil
	}
	return err
}

// parseAgentOperationID splits "<upgrade>/<node>/molt/a<attempt>"
// (phases.Upgrade.AgentOperationID).
func parseAgentOperationID(id string) (upgrade, node string, attempt int, ok bool) {
	parts := strings.Split(id, "/")
	if len(parts) != 4 || parts[2] != "molt" || !strings.HasPrefix(parts[3], "a") {
		return "", "", 0, false
	}
	att, err := strconv.Atoi(parts[3][1:])
	if err != nil {
		return "", "", 0, false
	}
	return parts[0], parts[1], att, true
}

// reportAgentResult records an agent's result for its own replacement.
func (c *Coordinator) reportAgentResult(ctx context.Context, cluster, node string, r api.OperationResult) error {
	upgrade, opNode, attempt, _ := parseAgentOperationID(r.ID)
	if opNode != node {
		return &RuleError{Rule: "operation-id", Detail: fmt.Sprintf("operation %q is not an operation of node %s", r.ID, node), Err: ErrNotFound}
	}
	if !c.sm.KnownUpgrade(cluster, upgrade) {
		return &RuleError{Rule: "operation-id", Detail: fmt.Sprintf("cluster %s has no upgrade %s", cluster, upgrade), Err: ErrNotFound}
	}
	v := r.Details[api.DetailAgentVersion]
	if v != "" {
		c.live.noteVersion(nodeKey(cluster, node), v)
	}
	return c.commitAgentResult(ctx, cluster, phases.AgentResult{Upgrade: upgrade, Node: node, Attempt: attempt,
		OK: r.State == api.OpSucceeded, Message: r.Message, Version: v})
}

// The skew policy (docs/agent.md, "Which agents a coordinator serves"): a
// coordinator serves agents of its own minor release and of the one
// before, of the same major — molt 0.2.x serves molt-agent 0.1.x and
// 0.2.x — so that a fleet whose coordinator was upgraded first keeps
// working until its next cluster upgrade's molt step brings the agents
// along. An agent of a newer minor than the coordinator, or one two
// minors behind, is refused at registration: the first may speak what
// the coordinator cannot read, the second was not tested against it. An
// agent that names no release (molt 0.1.0 sent none, or its own build's
// text) is taken to be 0.1.0.

// RuleAgentVersionSkew names the refusal of an agent outside the policy.
const RuleAgentVersionSkew = "agent-version-skew"

// agentServed reports whether a coordinator of release coord serves an
// agent of release agent, and if not, why.
func agentServed(coord, agent string) (bool, string) {
	cm, cn, ok := majorMinor(coord)
	if !ok {
		return true, "" // a build without a release serves everyone
	}
	am, an, ok := majorMinor(agent)
	if !ok {
		am, an = 0, 1 // names no release: 0.1.0
	}
	if am == cm && (an == cn || an+1 == cn) {
		return true, ""
	}
	lo := fmt.Sprintf("%d.%d", cm, max(cn-1, 0))
	return false, fmt.Sprintf("molt-agent %s is outside what this coordinator (molt %s) serves: molt-agent %s.x to %d.%d.x; install a served molt-agent on the host (its package, or an upgrade's molt step from a served release)",
		agent, coord, lo, cm, cn)
}

// majorMinor reads "X.Y.Z[-pre][+build]".
func majorMinor(v string) (major, minor int, ok bool) {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return 0, 0, false
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || p != strconv.Itoa(x) {
			return 0, 0, false
		}
		n[i] = x
	}
	return n[0], n[1], true
}

// checkAgentVersion applies the skew policy to an agent that registers.
func checkAgentVersion(agent string) error {
	if ok, why := agentServed(version.Version, agent); !ok {
		return &RuleError{Rule: RuleAgentVersionSkew, Detail: why, Err: ErrInvalid}
	}
	return nil
}
