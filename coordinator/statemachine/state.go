package statemachine

import (
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
)

// state is everything the coordinator replicates. It is only changed by
// apply functions (fsm.go) under the Machine's write lock, and read by
// queries (queries.go) under its read lock. It is not a format: snapshots
// hold its persisted form, stateV1 (persisted.go), so it and the records
// below may change as long as their conversions keep old snapshots
// reading to the same state.
type state struct {
	Clusters map[string]*ClusterRecord
	Releases map[string]*api.Release
	Audit    []AuditEntry
	// Tokens are operators' API tokens and agents' bootstrap tokens by
	// ID (trust.go).
	Tokens map[string]*TokenRecord
	// AuditLog and AgentAuditLog are the audit log's records of operators'
	// and agents' requests, oldest first; AuditSeq numbers records across
	// both (audit.go). Audit is the audit trail of releases before the
	// log, moved into AuditLog by its first record.
	AuditLog      []AuditRecord
	AgentAuditLog []AuditRecord
	AuditSeq      uint64

	// Set only while an apply function runs, never persisted: the Raft
	// index of the entry being applied, and whether it is the command
	// inside an AuditedCmd (audit.go).
	index     uint64
	enveloped bool
	// Channels are the catalog's release channels by name (auto.go).
	Channels map[string]*ChannelRecord
	// Members is the replicated record of what each coordinator member
	// runs and reads, by member ID (members.go); nil before the first.
	Members map[string]api.MemberCapabilities
	// Sequences are the rollout sequences by name (sequences.go); nil
	// before the first.
	Sequences map[string]*SequenceRecord
}

func newState() *state {
	return &state{Clusters: map[string]*ClusterRecord{}, Releases: map[string]*api.Release{}, Tokens: map[string]*TokenRecord{}}
}

// ClusterRecord is one cluster's spec, status and upgrade.
type ClusterRecord struct {
	Spec phases.ClusterSpec
	// KubeconfigSealed is the cluster's kubeconfig, sealed (secrets.go).
	// Kubeconfig is one in plain text, left by entries from before
	// sealing until a later PutCluster or a rewrap replaces it. At most
	// one of the two is set.
	KubeconfigSealed string
	Kubeconfig       string
	// StatusVersion is what the whole cluster runs: moved to the target
	// only when an upgrade finishes (SPEC §2).
	StatusVersion phases.Version
	AddonsVersion phases.Version
	// LifecycleVersion advances only with upgrades of step layout 0 (see
	// phases.StepLayoutLifecycle); kept so their logs replay, not served.
	LifecycleVersion phases.Version
	// Upgrade is the current upgrade, or the last one once finished.
	Upgrade *phases.Upgrade
	History []api.UpgradeSummary
	// Seq numbers the cluster's upgrades, for deterministic upgrade IDs.
	Seq    int
	Agents map[string]*AgentRecord
	// Policy gates automatic upgrades (nil: always open).
	Policy *maintenance.Policy
	// Preflights are the cluster's latest preflight runs, oldest first.
	Preflights   []*PreflightRun
	PreflightSeq int
	// AgentCerts lists, per node, the serial numbers (hex) of the agent
	// certificates that are valid, oldest first (trust.go).
	AgentCerts map[string][]string
	// Auto is the cluster's auto-upgrade record: the scheduler's last
	// attempt with its reason and outcome, the failures in a row and the
	// backoff they set (auto.go).
	Auto schedule.State
	// Backups are the cluster's recorded etcd snapshots, newest first, at
	// most the retention (backups.go).
	Backups []api.Backup
}

// AgentRecord is the replicated part of an agent's liveness: only changes
// (registered, missing or back, health flipped) are committed, never beats.
type AgentRecord struct {
	Registered   bool
	Address      string
	Missing      bool
	Healthy      bool
	Kubelet      string
	Containerd   string
	ChangedAt    time.Time
	RegisteredAt time.Time
	// StaticPods is the image of each static pod the agent last reported
	// running, by pod name without the node's suffix (observed.go); nil
	// until an agent's beat carried them (molt 0.2.0).
	StaticPods map[string]string
}

// AuditEntry is a record of the audit trail of releases before the audit
// log (audit.go): an operator action that bypassed or changed policy.
type AuditEntry struct {
	Time    time.Time
	Cluster string
	Action  string
	Detail  string
}

// ActiveUpgrade returns the cluster's running upgrade, or nil.
func (r *ClusterRecord) ActiveUpgrade() *phases.Upgrade {
	if r.Upgrade != nil && r.Upgrade.Active() {
		return r.Upgrade
	}
	return nil
}

// PendingUpgrade returns the cluster's upgrade that has not ended (waiting
// for its preflight or running), or nil: while there is one, no other
// upgrade starts and the cluster's shape does not change.
func (r *ClusterRecord) PendingUpgrade() *phases.Upgrade {
	if r.Upgrade != nil && r.Upgrade.InProgress() {
		return r.Upgrade
	}
	return nil
}

// NodeVersions counts nodes per version: from the upgrade while one has
// run, else every node at the status version.
func (r *ClusterRecord) NodeVersions(pool string) map[string]int {
	m := map[string]int{}
	if u := r.Upgrade; u != nil && u.To == r.Spec.Version {
		for i := range u.Pools {
			if pool == "" || u.Pools[i].Name == pool {
				for v, c := range u.PoolVersionCounts(&u.Pools[i]) {
					m[v.String()] += c
				}
			}
		}
		return m
	}
	for _, p := range r.Spec.Pools {
		if pool == "" || p.Name == pool {
			m[r.StatusVersion.String()] += len(p.Nodes)
		}
	}
	return m
}
