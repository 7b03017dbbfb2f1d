package statemachine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore/command"
)

// Machine is the replicated state machine: the state, and the registry of
// apply functions that change it (Handlers). It implements
// raftstore.Machine. Apply functions run on Raft's FSM goroutine under the
// write lock; every query (queries.go) takes the read lock and returns a
// copy, so nothing outside this package holds a reference into the state.
type Machine struct {
	mu sync.RWMutex
	st *state
	// policies caches compiled maintenance policies for the scheduler's
	// passes (auto.go); it is not state.
	policies policyCache
	// onChange is called (without the lock) after every applied command, so
	// the leader loop wakes instead of polling.
	onChange func()
	// snapshotFormat is the newest snapshot format every member reads
	// (SetSnapshotFormat); 0, unknown, writes format 1.
	snapshotFormat atomic.Int32
}

// SetSnapshotFormat sets the newest coordinator snapshot format every
// member reads, as the coordinator learnt it from the members. A
// snapshot may be sent to any member (Raft's InstallSnapshot), so it is
// written in that format, or in this release's newest if that is older;
// 0 (unknown, the default) writes format 1, which every release reads.
// Only format 1 exists: the choice is explicit so that the release that
// adds format 2 writes it only once every member reads it.
func (f *Machine) SetSnapshotFormat(readable int) { f.snapshotFormat.Store(int32(readable)) }

// SnapshotFormatWritten is the format Snapshot writes now.
func (f *Machine) SnapshotFormatWritten() int { return writeFormat(int(f.snapshotFormat.Load())) }

// New returns a state machine holding an empty state.
func New() *Machine { return &Machine{st: newState()} }

// SetOnChange sets the function called, without the lock, after every
// applied command (refused ones included). Call it before the machine is
// handed to raftstore.
func (f *Machine) SetOnChange(fn func()) { f.onChange = fn }

// Handlers is the command registry: command number (commands.go) → apply
// function. CmdAudited applies any other command of the registry but
// CmdAppendAudit inside it (audit.go). Bodies decode strictly: a field
// the command's V1 type does not declare, or a step layout newer than
// phases.CurrentStepLayout, is returned as an error that
// command.CannotRead recognises, changing nothing: raftstore halts the
// replica there (a newer release wrote the entry).
func (f *Machine) Handlers() map[command.Type]command.ApplyFunc {
	decs := decoders()
	out := make(map[command.Type]command.ApplyFunc, len(decs))
	for t, d := range decs {
		out[t] = f.locked(d)
	}
	return out
}

// decoders is the registry's decoder of every command number. Each
// decoder is filed under the number its command type returns (Type), so
// a decoder cannot be registered under another command's number.
func decoders() map[command.Type]decoder {
	decs := map[command.Type]decoder{}
	for _, r := range []registration{
		typed((*state).putRelease),
		typed((*state).putCluster),
		typed((*state).deleteCluster),
		typed((*state).startUpgrade),
		typed((*state).advance),
		typed((*state).nodeStepResult),
		typed((*state).stepResult),
		typed((*state).poolCommand),
		typed((*state).retryNode),
		typed((*state).agentRegister),
		typed((*state).agentHealth),
		typed((*state).setProtection),
		typed((*state).setPolicy),
		typed((*state).preflightStart),
		typed((*state).preflightResult),
		typed((*state).preflightFinish),
		typed((*state).putToken),
		typed((*state).deleteToken),
		typed((*state).enrollAgent),
		typed((*state).renewAgentCert),
		typedAt((*state).appendAudit),
		typed((*state).rewrapSecrets),
		typed((*state).poolWorkResult),
		typed((*state).autoStart),
		typed((*state).autoRecord),
		typed((*state).putChannel),
		typed((*state).setMembers),
		typed((*state).preflightResults),
		typed((*state).agentResult),
		typed((*state).putSequence),
		typed((*state).sequenceOverride),
		typed((*state).backup),
		typed((*state).agentsMissing),
	} {
		if _, dup := decs[r.t]; dup {
			panic(fmt.Sprintf("coordinator: command type %s registered twice", r.t))
		}
		decs[r.t] = r.dec
	}
	for _, t := range hiddenCommands {
		delete(decs, t)
	}
	decs[CmdAudited] = audited(decs)
	return decs
}

// hiddenCommands are command numbers this build leaves out of its
// registry: none in a release. The test build of hidenewest.go (build tag
// hidenewest) leaves out every command a release after 0.1.0 introduced,
// so that a member built from today's code meets them as a member of that
// release would (package mixed: such a member halts, then catches up once
// its binary is replaced).
var hiddenCommands []command.Type

// Auditable reports whether a command of type t may travel inside a
// CmdAudited: any registered command but the audit commands themselves.
func Auditable(t command.Type) bool {
	_, ok := decoders()[t]
	return ok && t != CmdAudited && t != CmdAppendAudit
}

// applyStep applies one decoded command to the state; the caller holds
// the write lock.
type applyStep func(*state) (any, error)

// decoder decodes a command's body into its applyStep. Undecodable bytes
// mean the log is corrupt: it panics, as raftstore expects. A body a
// newer release wrote (a field its V1 type does not declare, a newer step
// layout) decodes into a step that returns command.CannotRead, changing
// nothing, and raftstore halts the replica (decodeBody).
type decoder func(index uint64, body []byte) applyStep

// registration is a decoder and the command number it is filed under.
type registration struct {
	t   command.Type
	dec decoder
}

// typed adapts a typed state method to a decoder, filed under its
// command's number. The constraints hold every registered command to
// the persisted format: it encodes and decodes through its V1 form
// (persisted_v1_commands.go), never through the types it carries.
func typed[C Command, D interface {
	*C
	json.Unmarshaler
}](fn func(*state, C) (any, error)) registration {
	return typedAt[C, D](func(s *state, _ uint64, c C) (any, error) { return fn(s, c) })
}

// typedAt is typed for a method that needs the entry's Raft index.
func typedAt[C Command, D interface {
	*C
	json.Unmarshaler
}](fn func(*state, uint64, C) (any, error)) registration {
	var zero C
	t := zero.Type()
	return registration{t: t, dec: func(index uint64, body []byte) applyStep {
		var c C
		if err := decodeBody(index, t, body, D(&c)); err != nil {
			return refuse(err)
		}
		return func(s *state) (any, error) { return fn(s, index, c) }
	}}
}

// decodeBody decodes the body of a command of type t into c. It returns
// only what says a newer release wrote the entry
// (command.CannotRead): a field c's V1 type does not declare
// (command.ErrUnknownField), a step layout newer than this release knows
// (command.ErrCannotRead). The apply function returns it, changing
// nothing, and raftstore halts the replica at the entry rather than let
// it differ from the members that apply it. Any other error means the
// log is corrupt: it panics.
func decodeBody(index uint64, t command.Type, body []byte, c json.Unmarshaler) error {
	err := c.UnmarshalJSON(body)
	switch {
	case err == nil:
		return nil
	case command.CannotRead(err):
		return fmt.Errorf("command %s at index %d: %w", t, index, err)
	default:
		panic(fmt.Sprintf("coordinator: undecodable command %s at index %d: %v", t, index, err))
	}
}

// refuse is the step of a command refused before it was decoded: it
// changes nothing.
func refuse(err error) applyStep {
	return func(*state) (any, error) { return nil, err }
}

// locked makes a decoder an apply function: decode, then apply under the
// write lock, then tell onChange.
func (f *Machine) locked(d decoder) command.ApplyFunc {
	return func(index uint64, body []byte) (any, error) {
		step := d(index, body)
		f.mu.Lock()
		f.st.index = index
		v, err := step(f.st)
		f.st.index = 0
		f.mu.Unlock()
		if f.onChange != nil {
			f.onChange()
		}
		return v, err
	}
}

// Snapshot copies the whole state in the current snapshot format
// (snapshot.go).
func (f *Machine) Snapshot() ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return encodeSnapshot(f.st, f.SnapshotFormatWritten())
}

// Restore builds a fresh state from a snapshot of any format version this
// release reads and swaps it in; on error the state stays as it was.
func (f *Machine) Restore(data []byte) error {
	st, _, err := decodeSnapshot(data)
	if err != nil {
		return fmt.Errorf("coordinator: restore: %w", err)
	}
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	return nil
}

func (s *state) cluster(name string) (*ClusterRecord, error) {
	r, ok := s.Clusters[name]
	if !ok {
		return nil, fmt.Errorf("cluster %q: %w", name, ErrNotFound)
	}
	return r, nil
}

func (s *state) putRelease(c PutReleaseCmd) (any, error) {
	c.Release.Version = replayVersion(c.Release.Version)
	v, err := ValidateRelease(&c.Release)
	if err != nil {
		return nil, err
	}
	rel := c.Release
	rel.Version = v.String()
	s.Releases[rel.Version] = &rel
	return nil, nil
}

func (s *state) putCluster(c PutClusterCmd) (any, error) {
	spec := c.Spec
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := s.clusterPlaces(&spec); err != nil {
		return nil, err
	}
	if spec.Kind == phases.KindUser {
		admin, ok := s.Clusters[spec.AdminCluster]
		if !ok {
			return nil, &RuleError{Rule: "admin-cluster", Detail: fmt.Sprintf("admin cluster %q is not registered", spec.AdminCluster), Err: ErrInvalid}
		}
		if admin.Spec.Kind != phases.KindAdmin && admin.Spec.Kind != phases.KindHybrid {
			return nil, &RuleError{Rule: "admin-cluster", Detail: fmt.Sprintf("cluster %q is %s, not admin or hybrid", spec.AdminCluster, admin.Spec.Kind), Err: ErrInvalid}
		}
	}
	old, exists := s.Clusters[spec.Name]
	if exists && old.PendingUpgrade() != nil {
		return nil, fmt.Errorf("cluster %s: upgrade %s is running; its shape cannot change now: %w", spec.Name, old.Upgrade.ID, ErrUpgradeInProgress)
	}
	// A policy given with the spec is judged on the cluster as the entry
	// leaves it, and stored with the spec or not at all.
	var policy *maintenance.Policy
	if c.Policy != nil {
		running := spec.Version
		if exists {
			running = old.StatusVersion
		}
		var err error
		if policy, err = s.validPolicy(*c.Policy, s.policyContextFor(spec.Channel, running, c.Now)); err != nil {
			return nil, err
		}
	}
	if !exists {
		r := &ClusterRecord{Spec: spec, StatusVersion: spec.Version,
			AddonsVersion: spec.Version, LifecycleVersion: spec.Version, Agents: map[string]*AgentRecord{}}
		r.setKubeconfig(c)
		if policy != nil {
			storePolicy(r, policy)
		} else {
			r.Auto.HeldUntil = c.HoldUntil
		}
		s.Clusters[spec.Name] = r
		return nil, nil
	}
	// Re-registering keeps history and agents. The version an operator
	// states is what the cluster runs, or the desired version molt already
	// holds (the target of a cancelled or failed upgrade: what GET returns
	// must PUT back unchanged); it may only be restated, not moved:
	// versions move through upgrades.
	if spec.Version != old.StatusVersion && spec.Version != old.Spec.Version {
		detail := fmt.Sprintf("cluster %s runs %s; use an upgrade to change its version", spec.Name, old.StatusVersion)
		if old.Spec.Version != old.StatusVersion {
			detail = fmt.Sprintf("cluster %s runs %s (desired %s); use an upgrade to change its version", spec.Name, old.StatusVersion, old.Spec.Version)
		}
		return nil, &RuleError{Rule: "cluster-version", Detail: detail, Err: ErrInvalid}
	}
	old.Spec = spec
	if policy != nil {
		storePolicy(old, policy)
	}
	old.pruneAgentCerts()
	old.setKubeconfig(c)
	if u := old.Upgrade; u != nil && (u.State == phases.UpgradeCancelled || u.State == phases.UpgradeFailed) && !u.Closed {
		// A cancelled or failed upgrade was laid out for the old shape: it
		// is not resumed or rolled back on the new one.
		u.Closed = true
		u.Revision++
	}
	return nil, nil
}

func (s *state) deleteCluster(c DeleteClusterCmd) (any, error) {
	r, err := s.cluster(c.Name)
	if err != nil {
		return nil, err
	}
	if r.PendingUpgrade() != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.Name, ErrUpgradeInProgress)
	}
	for name, o := range s.Clusters {
		if o.Spec.AdminCluster == c.Name {
			return nil, &RuleError{Rule: "admin-cluster", Detail: fmt.Sprintf("cluster %s still manages user cluster %s", c.Name, name), Err: ErrInvalid}
		}
	}
	delete(s.Clusters, c.Name)
	return nil, nil
}

// checkUpgrade applies every rule an upgrade must pass, against this state.
// It changes nothing; startUpgrade and the dry run share it.
func (s *state) checkUpgrade(name string, to phases.Version) (*ClusterRecord, error) {
	r, err := s.cluster(name)
	if err != nil {
		return nil, err
	}
	if u := r.PendingUpgrade(); u != nil {
		return nil, fmt.Errorf("cluster %s: upgrade %s to %s is %s: %w", name, u.ID, u.To, u.State, ErrUpgradeInProgress)
	}
	if u := r.Upgrade; u != nil && (u.State == phases.UpgradeCancelled || u.State == phases.UpgradeFailed) && u.To != to && u.VersionCounts()[u.To] > 0 {
		// SPEC §3 rule 5: nodes run at most the old and the new version.
		return nil, &RuleError{Rule: "mixed-cluster", Detail: fmt.Sprintf("%s upgrade %s left nodes at %s; upgrade to %s (or roll its pools back) before another version", u.State, u.ID, u.To, u.To), Err: ErrInvalid}
	}
	if _, ok := s.Releases[to.String()]; !ok {
		return nil, &RuleError{Rule: phases.RuleUnknown, Detail: fmt.Sprintf("version %s is not in the release catalog", to), Err: ErrUnknownVersion}
	}
	if err := phases.CheckUpgrade(r.StatusVersion, to); err != nil {
		return nil, err
	}
	switch r.Spec.Kind {
	case phases.KindAdmin, phases.KindHybrid:
		var users []phases.ClusterVersion
		for _, n := range sortedKeys(s.Clusters) {
			if o := s.Clusters[n]; o.Spec.AdminCluster == name {
				users = append(users, phases.ClusterVersion{Name: n, Version: o.StatusVersion})
			}
		}
		if err := phases.CheckAdminUpgrade(r.StatusVersion, to, users); err != nil {
			return nil, err
		}
	case phases.KindUser:
		if admin, ok := s.Clusters[r.Spec.AdminCluster]; ok {
			if err := phases.CheckUserUpgrade(to, admin.StatusVersion); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

func (s *state) startUpgrade(c StartUpgradeCmd) (any, error) {
	if c.Preflight != nil {
		if err := checkHostPlan(c.Preflight.HostPlan); err != nil {
			return nil, err
		}
	}
	r, err := s.checkUpgrade(c.Cluster, c.To)
	if err != nil {
		return nil, err
	}
	if c.Preflight != nil && (c.Preflight.Cluster != c.Cluster || r.preflight(c.Preflight.ID) != nil) {
		return nil, fmt.Errorf("preflight %s of cluster %s cannot start here: %w", c.Preflight.ID, c.Preflight.Cluster, phases.ErrStale)
	}
	if c.Options.EmergencyReason != "" {
		if c.To.Minor != r.StatusVersion.Minor {
			return nil, &RuleError{Rule: "emergency-patch-only", Detail: fmt.Sprintf("an emergency override forces patches only; %s → %s is a minor upgrade", r.StatusVersion, c.To), Err: ErrInvalid}
		}
		s.audit(AuditEntry{Time: c.Now, Cluster: c.Cluster, Action: "emergency-override", Detail: fmt.Sprintf("%s → %s: %s", r.StatusVersion, c.To, c.Options.EmergencyReason)})
	}
	r.Seq++
	spec := r.Spec
	spec.Version = r.StatusVersion
	if c.Options.AgentVersion != "" && c.Options.StepLayout >= phases.StepLayoutMolt {
		// The molt step's hosts: the leader sent what each agent said it
		// runs (Options.AgentVersions); the target is the catalog's.
		rel, ok := s.Releases[c.To.String()]
		if !ok || rel.Agent == nil || rel.Agent.Version != c.Options.AgentVersion {
			return nil, fmt.Errorf("release %s does not name molt-agent %s: %w", c.To, c.Options.AgentVersion, phases.ErrStale)
		}
	}
	u := phases.NewUpgrade(phases.UpgradeID(c.Cluster, c.To, r.Seq), &spec, c.To, c.Options, c.Now)
	r.Upgrade = u
	if c.Preflight == nil {
		// Entries from releases that ran preflight before proposing.
		r.Spec.Version = c.To
		return u.ID, nil
	}
	// SPEC §4: preflight first; spec.version is set, and the steps may
	// run, only once the run this entry starts has passed (preflightFinish).
	s.addPreflight(r, *c.Preflight)
	u.State, u.Preflight = phases.UpgradePreflight, c.Preflight.ID
	return u.ID, nil
}

func (s *state) upgrade(cluster, id string) (*ClusterRecord, *phases.Upgrade, error) {
	r, err := s.cluster(cluster)
	if err != nil {
		return nil, nil, err
	}
	if r.Upgrade == nil || (id != "" && r.Upgrade.ID != id) {
		return nil, nil, fmt.Errorf("cluster %s has no upgrade %s: %w", cluster, id, phases.ErrStale)
	}
	return r, r.Upgrade, nil
}

func (s *state) advance(c AdvanceCmd) (any, error) {
	r, u, err := s.upgrade(c.Cluster, c.Upgrade)
	if err != nil {
		return nil, err
	}
	var res AdvanceResult
	for _, a := range c.Actions {
		if err := u.Apply(a, c.Now); err != nil {
			res.Stale = append(res.Stale, a.ID)
			continue
		}
		res.Applied = append(res.Applied, a.ID)
		if a.Kind == phases.ActStartStep && len(c.Protections) > 0 {
			protectPool(u, a.Step, c.Protections)
		}
		switch a.Kind {
		case phases.ActFinish:
			s.finish(r, u)
		case phases.ActFailPool:
			// The leader decided these; the audit trail says so.
			p, _ := u.Pool(a.Pool)
			s.audit(AuditEntry{Time: c.Now, Cluster: c.Cluster, Action: "pool-failed", Detail: a.Pool + ": " + p.FailReason})
			if p.RollingBack {
				s.audit(AuditEntry{Time: c.Now, Cluster: c.Cluster, Action: "pool-rollback", Detail: a.Pool + ": automatic (rollback policy auto)"})
			}
		case phases.ActHalt:
			if u.State == phases.UpgradeFailed {
				s.audit(AuditEntry{Time: c.Now, Cluster: c.Cluster, Action: "upgrade-failed", Detail: u.ID + ": " + u.Reason})
				s.sequenceFailure(r, u, c.Now)
			}
		}
	}
	return res, nil
}

// finish moves status to the target: every component is upgraded and the
// health checks passed (SPEC §2).
func (s *state) finish(r *ClusterRecord, u *phases.Upgrade) {
	r.StatusVersion = u.To
	r.History = append(r.History, api.UpgradeSummary{ID: u.ID, From: u.From.String(), To: u.To.String(),
		State: convert.UpgradeStateToAPI(u.State), CreatedAt: u.CreatedAt, FinishedAt: u.FinishedAt})
}

// nodeStepResult returns a copy of the node's task after the result, so
// the caller learns whether this very command finished the node.
func (s *state) nodeStepResult(c NodeStepResultCmd) (any, error) {
	r, u, err := s.upgrade(c.Cluster, c.Result.Upgrade)
	if err != nil {
		return nil, err
	}
	m := u.NodeResultMembership(c.Result)
	if err := u.ApplyNodeStepResult(c.Result, c.Now); err != nil {
		return nil, err
	}
	s.applyMembership(r, m)
	n, _ := u.Node(c.Result.Node)
	return copyNodeTask(n), nil
}

// poolWorkResult commits a blue/green pool's work outcome and the
// membership change it makes.
func (s *state) poolWorkResult(c PoolWorkResultCmd) (any, error) {
	r, u, err := s.upgrade(c.Cluster, c.Result.Upgrade)
	if err != nil {
		return nil, err
	}
	m := u.PoolWorkMembership(c.Result)
	if err := u.ApplyPoolWorkResult(c.Result, c.Now); err != nil {
		return nil, err
	}
	s.applyMembership(r, m)
	return nil, nil
}

// applyMembership changes a MIG pool's nodes and groups in the cluster's
// spec as a result made them (created instances join, deleted ones
// leave); a node that leaves loses its agent's record and certificates.
func (s *state) applyMembership(r *ClusterRecord, m phases.Membership) {
	if m.Empty() {
		return
	}
	r.Spec.ApplyMembership(m)
	for _, n := range m.Remove {
		delete(r.Agents, n)
	}
	r.pruneAgentCerts()
}

func (s *state) stepResult(c StepResultCmd) (any, error) {
	r, u, err := s.upgrade(c.Cluster, c.Result.Upgrade)
	if err != nil {
		return nil, err
	}
	if err := u.ApplyStepResult(c.Result, c.Now); err != nil {
		return nil, err
	}
	if c.Result.OK {
		switch c.Result.Step {
		case phases.StepIDAddons:
			r.AddonsVersion = u.To
		case phases.StepIDLifecycle:
			r.LifecycleVersion = u.To
		}
	}
	return nil, nil
}

// Pool commands (SPEC §7), phases.PoolCommand's.
const (
	PoolCancel   = phases.PoolCancel
	PoolResume   = phases.PoolResume
	PoolRollback = phases.PoolRollback
	PoolComplete = phases.PoolComplete
)

func (s *state) poolCommand(c PoolCommandCmd) (any, error) {
	r, err := s.cluster(c.Cluster)
	if err != nil {
		return nil, err
	}
	if _, ok := r.Spec.Pool(c.Pool); !ok {
		return nil, fmt.Errorf("pool %s/%s: %w", c.Cluster, c.Pool, ErrNotFound)
	}
	u := r.Upgrade
	if u == nil || !u.Active() && u.State != phases.UpgradeCancelled && u.State != phases.UpgradeFailed {
		return nil, fmt.Errorf("cluster %s: %w", c.Cluster, ErrNoUpgrade)
	}
	if err := u.PoolCommand(c.Pool, c.Command, c.Now); err != nil {
		var ce *phases.CommandError
		if errors.As(err, &ce) {
			rerr := &RuleError{Rule: ce.Rule, Detail: ce.Detail, Err: ErrCommandNotAllowed}
			if ce.Rule == "pool-command" {
				rerr.Err = ErrInvalid
			}
			return nil, rerr
		}
		return nil, err
	}
	s.audit(AuditEntry{Time: c.Now, Cluster: c.Cluster, Action: "pool-" + c.Command, Detail: c.Pool})
	return nil, nil
}

func (s *state) retryNode(c RetryNodeCmd) (any, error) {
	r, err := s.cluster(c.Cluster)
	if err != nil {
		return nil, err
	}
	u := r.ActiveUpgrade()
	if u == nil {
		return nil, fmt.Errorf("cluster %s: %w", c.Cluster, ErrNoUpgrade)
	}
	if err := u.RetryNode(c.Node, c.Now); err != nil {
		return nil, &RuleError{Rule: "node-retry", Detail: err.Error(), Err: ErrCommandNotAllowed}
	}
	s.audit(AuditEntry{Time: c.Now, Cluster: c.Cluster, Action: "node-retry", Detail: c.Node})
	return nil, nil
}

func (s *state) hasNode(r *ClusterRecord, node string) bool {
	for _, p := range r.Spec.Pools {
		for _, n := range p.Nodes {
			if n.Name == node {
				return true
			}
		}
	}
	return false
}

func (s *state) agentRegister(c AgentRegisterCmd) (any, error) {
	r, err := s.cluster(c.Cluster)
	if err != nil {
		return nil, err
	}
	if !s.hasNode(r, c.Node) {
		return nil, fmt.Errorf("node %s/%s: %w", c.Cluster, c.Node, ErrNotFound)
	}
	if r.Agents == nil {
		r.Agents = map[string]*AgentRecord{}
	}
	a := r.Agents[c.Node]
	if a == nil {
		a = &AgentRecord{}
		r.Agents[c.Node] = a
	}
	a.Registered, a.Address, a.Missing, a.RegisteredAt, a.ChangedAt = true, c.Address, false, c.Now, c.Now
	return nil, nil
}

func (s *state) agentHealth(c AgentHealthCmd) (any, error) {
	r, err := s.cluster(c.Cluster)
	if err != nil {
		return nil, err
	}
	a := r.Agents[c.Node]
	if a == nil {
		return nil, fmt.Errorf("agent %s/%s: %w", c.Cluster, c.Node, ErrNotFound)
	}
	a.Missing, a.Healthy, a.ChangedAt = c.Missing, c.Healthy, c.Now
	if !c.Missing {
		a.Kubelet, a.Containerd = c.Kubelet, c.Containerd
		if c.StaticPods != nil {
			// Replaced, never changed in place: copies made before hold
			// the old map.
			a.StaticPods = nil
			if len(c.StaticPods) > 0 {
				a.StaticPods = maps.Clone(c.StaticPods)
			}
		}
	}
	return nil, nil
}

// protectPool records the protections of the nodes of the pool that step
// upgrades; names outside that pool are ignored.
func protectPool(u *phases.Upgrade, step string, until map[string]time.Time) {
	s, ok := u.Step(step)
	if !ok || s.Kind != phases.StepPool {
		return
	}
	p, ok := u.Pool(s.Pool)
	if !ok {
		return
	}
	for _, n := range u.PoolNodes(p) {
		if t, ok := until[n.Node]; ok {
			_ = u.SetProtection(n.Node, t) // n is the pool's own node
		}
	}
}

// setProtection is how releases before AdvanceCmd.Protections recorded a
// protection, after the step had started; logs still carry it.
func (s *state) setProtection(c SetProtectionCmd) (any, error) {
	_, u, err := s.upgrade(c.Cluster, c.Upgrade)
	if err != nil {
		return nil, err
	}
	return nil, u.SetProtection(c.Node, c.Until)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
