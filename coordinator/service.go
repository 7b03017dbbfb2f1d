package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
)

// The methods below are what the REST API calls. Writes go through Raft
// (and fail with raftstore.ErrNotLeader on followers: the HTTP layer
// forwards them); reads are served from this member's replica.

// PutRelease adds or replaces a release catalog entry.
func (c *Coordinator) PutRelease(ctx context.Context, r api.Release) error {
	if err := checkReleaseLimits(r); err != nil {
		return err
	}
	if _, err := statemachine.AdmitRelease(&r); err != nil {
		return err
	}
	_, err := c.apply(ctx, statemachine.PutReleaseCmd{Release: r, Now: c.cfg.Clock.Now()})
	return err
}

// Release returns one catalog entry.
func (c *Coordinator) Release(version string) (api.Release, error) {
	v, err := phases.ParseVersion(version)
	if err != nil {
		return api.Release{}, &RuleError{Rule: phases.RuleInvalid, Detail: err.Error(), Err: ErrInvalid}
	}
	r, ok := c.sm.Release(v.String())
	if !ok {
		return api.Release{}, fmt.Errorf("release %s: %w", v, ErrNotFound)
	}
	return r, nil
}

// Releases lists the catalog, oldest version first.
func (c *Coordinator) Releases() []api.Release {
	return c.sm.Releases()
}

// PutCluster registers a cluster or updates its shape; an empty kubeconfig
// keeps the one the cluster has. The kubeconfig is sealed before it is
// proposed (secrets.go): the log holds only its envelope. A policy is
// stored with the spec in the same entry, validated as SetPolicy
// validates one (an invalid one refuses the whole request); nil keeps the
// cluster's, and a new cluster registered without one is held from
// automatic upgrades for Config.RegistrationHold.
//
// A new cluster's stated version is compared with what its nodes report
// (checkRegistration): refused when it differs, or, with adopt, replaced
// by the observed one.
func (c *Coordinator) PutCluster(ctx context.Context, spec phases.ClusterSpec, kubeconfig string, policy *maintenance.Policy, adopt bool) error {
	if err := c.admitCloud(ctx, &spec); err != nil {
		return err
	}
	if _, err := c.sm.Cluster(spec.Name); errors.Is(err, ErrNotFound) {
		if err := c.checkRegistration(ctx, &spec, kubeconfig, adopt); err != nil {
			return err
		}
	}
	if err := spec.Admit(); err != nil {
		return err
	}
	now := c.cfg.Clock.Now()
	cmd := statemachine.PutClusterCmd{Spec: spec, Policy: policy, Now: now}
	if policy == nil && c.cfg.RegistrationHold > 0 {
		// Applied only if the entry registers the cluster: the leader
		// cannot know that before it lands.
		cmd.HoldUntil = now.Add(c.cfg.RegistrationHold)
	}
	if err := c.sm.Precheck(cmd); err != nil {
		return err
	}
	var notes []string
	if policy != nil {
		notes = append(notes, fmt.Sprintf("with a maintenance policy (window: %v, exclusions: %d)", policy.Window != nil, len(policy.Exclusions)))
	}
	if kubeconfig != "" {
		notes = append(notes, "with a kubeconfig (sealed)")
	}
	if len(notes) > 0 {
		noteAudit(ctx, func(r *AuditRecord) { r.Detail = strings.Join(notes, "; ") })
	}
	if kubeconfig != "" {
		sealed, err := c.sealKubeconfig(spec.Name, kubeconfig)
		if err != nil {
			return err
		}
		cmd.KubeconfigSealed = sealed
	}
	_, err := c.apply(ctx, cmd)
	return err
}

// DeleteCluster forgets a cluster that is not upgrading.
func (c *Coordinator) DeleteCluster(ctx context.Context, name string) error {
	cmd := statemachine.DeleteClusterCmd{Name: name, Now: c.cfg.Clock.Now()}
	if err := c.sm.Precheck(cmd); err != nil {
		return err
	}
	_, err := c.apply(ctx, cmd)
	return err
}

// Cluster returns a cluster's spec and status.
func (c *Coordinator) Cluster(name string) (api.Cluster, error) {
	r, err := c.sm.Cluster(name)
	if err != nil {
		return api.Cluster{}, err
	}
	drift, _ := c.sm.Drift(name)
	return clusterView(&r, c.live, drift), nil
}

// Clusters lists every cluster by name.
func (c *Coordinator) Clusters() []api.Cluster {
	var out []api.Cluster
	for _, r := range c.sm.Clusters() {
		drift, _ := c.sm.Drift(r.Spec.Name)
		out = append(out, clusterView(&r, c.live, drift))
	}
	return out
}

// Upgrade returns a cluster's current (or last) upgrade.
func (c *Coordinator) Upgrade(cluster string) (*phases.Upgrade, error) {
	return c.sm.Upgrade(cluster)
}

// Plan checks every rule for an upgrade of cluster to version and returns
// the plan, changing nothing (a dry run).
func (c *Coordinator) Plan(cluster string, req api.UpgradeRequest) (phases.Plan, error) {
	to, err := phases.ParseVersion(req.Version)
	if err != nil {
		return phases.Plan{}, &RuleError{Rule: phases.RuleInvalid, Detail: err.Error(), Err: ErrInvalid}
	}
	if req.Emergency != nil {
		// The reason is the audit trail's answer to "why"; blanks answer
		// nothing (maintenance.CheckOverrideReason).
		var re *maintenance.RuleError
		if err := maintenance.CheckOverrideReason(req.Emergency.Reason); errors.As(err, &re) {
			return phases.Plan{}, &RuleError{Rule: re.Rule, Detail: re.Detail, Err: ErrInvalid}
		}
	}
	if err := phases.CheckOptions(c.upgradeOptions(req)); err != nil {
		return phases.Plan{}, err
	}
	r, err := c.sm.CheckUpgrade(cluster, to)
	if err != nil {
		return phases.Plan{}, err
	}
	if err := checkObserved(&r, to); err != nil {
		return phases.Plan{}, err
	}
	if req.Emergency != nil && to.Minor != r.StatusVersion.Minor {
		return phases.Plan{}, &RuleError{Rule: "emergency-patch-only", Detail: fmt.Sprintf("an emergency override forces patches only; %s → %s is a minor upgrade", r.StatusVersion, to), Err: ErrInvalid}
	}
	spec := r.Spec
	spec.Version = r.StatusVersion
	opts := c.withAgents(c.upgradeOptions(req), cluster, to)
	plan := phases.MakePlan(&spec, to, opts, phases.DefaultDurations(), c.cfg.Clock.Now())
	if opts.Automatic && opts.EmergencyReason == "" && r.Policy != nil {
		// An automatic upgrade waits for its window: the timeline says
		// when it is expected to finish, in wall-clock time.
		if cp, err := r.Policy.Compile(); err == nil {
			plan = plan.InWindows(policyAvailability{p: cp, kind: schedule.KindOf(r.StatusVersion, to)})
		}
	}
	return plan, nil
}

// upgradeOptions are the options of an upgrade request. An emergency
// override's reason is kept with the upgrade and in the request's audit
// record; its self-declared "by" is ignored: the record names the
// authenticated caller.
func (c *Coordinator) upgradeOptions(req api.UpgradeRequest) phases.Options {
	o := phases.Options{Automatic: req.Automatic, ConcurrentWorkerPools: req.ConcurrentWorkerPools, StepLayout: c.stepLayout(),
		HealthTimeout: c.cfg.HealthTimeout, GateTimeout: c.cfg.GateTimeout}
	if req.Emergency != nil {
		o.EmergencyReason = req.Emergency.Reason
	}
	return o
}

// StartUpgrade starts an upgrade after every rule passed. The FSM checks
// the rules again on the state the command lands on, so a request that
// raced another change is refused rather than applied.
func (c *Coordinator) StartUpgrade(ctx context.Context, cluster string, req api.UpgradeRequest) (*phases.Upgrade, error) {
	plan, err := c.Plan(cluster, req)
	if err != nil {
		return nil, err
	}
	// The upgrade and its preflight run start in one entry; the leader runs
	// the checks, and the entry that stores the report moves the upgrade
	// to running, or to refused with the blocking checks (SPEC §4 step 1).
	// Nothing here waits for them.
	to, _ := phases.ParseVersion(req.Version)
	run, err := c.newPreflightRun(cluster, to)
	if err != nil {
		return nil, err
	}
	noteAudit(ctx, func(r *AuditRecord) {
		r.Detail = fmt.Sprintf("%s → %s", plan.From, to)
		if req.Automatic {
			r.Detail += ", automatic"
		}
		if req.Emergency != nil {
			r.Detail += ", emergency override"
			r.Reason = req.Emergency.Reason
		}
	})
	if _, err := c.apply(ctx, statemachine.StartUpgradeCmd{Cluster: cluster, To: to, Options: c.withAgents(c.upgradeOptions(req), cluster, to), Now: c.cfg.Clock.Now(), Preflight: &run}); err != nil {
		return nil, err
	}
	return c.Upgrade(cluster)
}

// PoolCommand runs cancel, resume, rollback or complete on a pool.
func (c *Coordinator) PoolCommand(ctx context.Context, cluster, pool, command string) error {
	cmd := statemachine.PoolCommandCmd{Cluster: cluster, Pool: pool, Command: command, Now: c.cfg.Clock.Now()}
	if err := c.sm.Precheck(cmd); err != nil {
		return err
	}
	_, err := c.apply(ctx, cmd)
	return err
}

// RetryNode gives a failed node a new attempt.
func (c *Coordinator) RetryNode(ctx context.Context, cluster, node string) error {
	cmd := statemachine.RetryNodeCmd{Cluster: cluster, Node: node, Now: c.cfg.Clock.Now()}
	if err := c.sm.Precheck(cmd); err != nil {
		return err
	}
	_, err := c.apply(ctx, cmd)
	return err
}

// Members lists the Raft members.
func (c *Coordinator) Members() ([]api.Member, error) {
	ms, err := c.store.Members()
	if err != nil {
		return nil, err
	}
	out := make([]api.Member, 0, len(ms))
	for _, m := range ms {
		am := api.Member{ID: m.ID, RaftAddr: m.RaftAddr, HTTPAddr: m.HTTPAddr, Voter: m.Voter, Leader: m.Leader}
		caps, from, reason := c.capsOf(m.ID)
		am.CapabilitiesFrom, am.Reason = from, reason
		if from != fromAssumed {
			am.Version, am.Commit, am.Capabilities = caps.Version, caps.Commit, &caps
		}
		out = append(out, am)
	}
	return out, nil
}

// LeaderHTTPAddr is the leader's REST address, "" when no leader is known.
func (c *Coordinator) LeaderHTTPAddr() string {
	_, _, addr := c.store.Leader()
	return addr
}

// LeaderChanged returns a channel closed when the leader this member knows
// changes (see raftstore.Store.LeaderChanged).
func (c *Coordinator) LeaderChanged() <-chan struct{} { return c.store.LeaderChanged() }

// AppliedIndex is the Raft index of the state this member serves reads
// from (see api.IndexHeader).
func (c *Coordinator) AppliedIndex() uint64 { return c.store.AppliedIndex() }

// ReadIndex, on the leader, returns an index that covers every write
// acknowledged before the call (raftstore.Store.ReadIndex): a member that
// has applied it judges a credential by state no older than the request.
func (c *Coordinator) ReadIndex(ctx context.Context) (uint64, error) {
	return c.store.ReadIndex(ctx)
}

// WaitApplied blocks until this member has applied the state at index, or
// ctx ends.
func (c *Coordinator) WaitApplied(ctx context.Context, index uint64) error {
	return c.store.WaitForIndex(ctx, index)
}
