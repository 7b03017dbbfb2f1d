package coordinator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

// PreflightTimeout is how long a run waits for agents' host checks, per
// wave of artifact checks (preflightTimeout).
const PreflightTimeout = 2 * time.Minute

// DefaultPreflightArtifactWave is the default of
// Config.PreflightArtifactWave.
const DefaultPreflightArtifactWave = 20

// StartPreflight starts a preflight run for an upgrade of cluster to
// version and returns its ID at once; the run finishes in the background.
func (c *Coordinator) StartPreflight(ctx context.Context, cluster, version string) (string, error) {
	to, err := phases.ParseVersion(version)
	if err != nil {
		return "", &RuleError{Rule: phases.RuleInvalid, Detail: err.Error(), Err: ErrInvalid}
	}
	run, err := c.newPreflightRun(cluster, to)
	if err != nil {
		return "", err
	}
	noteAudit(ctx, func(r *AuditRecord) { r.Detail = "run " + run.ID + " for " + to.String() })
	if _, err := c.apply(ctx, statemachine.PreflightStartCmd{Run: run}); err != nil {
		return "", err
	}
	return run.ID, nil
}

// Preflight runs are replicated objects (SPEC §5; their commands and apply
// functions are statemachine's): the leader decides the host operations of
// a run and commits them with the run, agents' results are committed as
// they come, and the leader commits the report once every host answered or
// the run's deadline passed. A new leader resumes a run from the log: it
// offers the same operation IDs and finishes it.

// newPreflightRun decides a run for an upgrade of cluster to version: its
// ID and every host's operations, from the state this member has applied.
// The entry that carries it re-checks the ID, so a run decided on stale
// state is refused, not stored twice.
func (c *Coordinator) newPreflightRun(cluster string, to phases.Version) (PreflightRun, error) {
	now := c.cfg.Clock.Now()
	r, err := c.sm.Cluster(cluster)
	if err != nil {
		return PreflightRun{}, err
	}
	in, err := c.preflightInput(cluster, to, now)
	if err != nil {
		return PreflightRun{}, err
	}
	addrs := map[string]string{}
	for n, a := range r.Agents {
		addrs[n] = a.Address
	}
	id := fmt.Sprintf("%s-%d", strings.ReplaceAll(cluster, ".", "-"), r.PreflightSeq+1)
	ops := convert.PreflightOperationsToAPI(preflight.HostOperations(id, in, "", addrs))
	run := PreflightRun{ID: id, Cluster: cluster, Target: to, CreatedAt: now, Deadline: now.Add(preflightTimeout(ops, c.cfg.PreflightArtifactWave)),
		Operations: ops}
	// Once every member derives a run's operations itself, the entry
	// carries the plan instead of them (statemachine's preflight_plan.go):
	// a few hundred bytes instead of 9 MB at 15,000 hosts. The members
	// derive them from the state at the entry, which is where this
	// member's copy came from, a few entries earlier at most.
	derived := PreflightRun{HostPlan: statemachine.HostPlanRing}
	if c.checkReadable(needOf(statemachine.PreflightStartCmd{Run: derived})) == nil {
		run.Operations, run.HostPlan = nil, statemachine.HostPlanRing
	}
	return run, nil
}

// Preflight returns a stored run.
func (c *Coordinator) Preflight(cluster, id string) (PreflightRun, error) {
	return c.sm.Preflight(cluster, id)
}

// Preflights lists the cluster's stored preflight runs, newest first,
// without their operations and results.
func (c *Coordinator) Preflights(cluster string) ([]PreflightSummary, error) {
	return c.sm.Preflights(cluster)
}

// preflightInput gathers what the checks need from the replicated state
// (statemachine.PreflightInput) and from the leader's liveness.
func (c *Coordinator) preflightInput(cluster string, to phases.Version, now time.Time) (preflight.Input, error) {
	in, err := c.sm.PreflightInput(cluster, to)
	if err != nil {
		return in, err
	}
	in.Now, in.HeartbeatGrace = now, c.cfg.MissingAfter
	for node, as := range in.Agents {
		if t, ok := c.live.lastSeen(nodeKey(cluster, node)); ok {
			as.LastSeen = t
			in.Agents[node] = as
		}
	}
	return in, nil
}
