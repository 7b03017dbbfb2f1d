package statemachine

import (
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// state is everything the coordinator replicates. It is only changed by
// apply functions (fsm.go) under the Machine's write lock, and read by
// queries (queries.go) under its read lock. Its JSON encoding is the
// snapshot's body (snapshot.go): field names and tags are a format.
type state struct {
	Clusters map[string]*ClusterRecord `json:"clusters"`
	Releases map[string]*api.Release   `json:"releases"`
	Audit    []AuditEntry              `json:"audit,omitempty"`
}

func newState() *state {
	return &state{Clusters: map[string]*ClusterRecord{}, Releases: map[string]*api.Release{}}
}

// ClusterRecord is one cluster's spec, status and upgrade.
type ClusterRecord struct {
	Spec       phases.ClusterSpec `json:"spec"`
	Kubeconfig string             `json:"kubeconfig,omitempty"`
	// StatusVersion is what the whole cluster runs: moved to the target
	// only when an upgrade finishes (SPEC §2).
	StatusVersion phases.Version `json:"statusVersion"`
	AddonsVersion phases.Version `json:"addonsVersion"`
	// LifecycleVersion advances only with upgrades of step layout 0 (see
	// phases.StepLayoutLifecycle); kept so their logs replay, not served.
	LifecycleVersion phases.Version `json:"lifecycleVersion"`
	// Upgrade is the current upgrade, or the last one once finished.
	Upgrade *phases.Upgrade      `json:"upgrade,omitempty"`
	History []api.UpgradeSummary `json:"history,omitempty"`
	// Seq numbers the cluster's upgrades, for deterministic upgrade IDs.
	Seq    int                     `json:"seq"`
	Agents map[string]*AgentRecord `json:"agents,omitempty"`
	// Policy gates automatic upgrades (nil: always open).
	Policy *maintenance.Policy `json:"policy,omitempty"`
	// Preflights are the cluster's latest preflight runs, oldest first.
	Preflights   []*PreflightRun `json:"preflights,omitempty"`
	PreflightSeq int             `json:"preflightSeq"`
}

// AgentRecord is the replicated part of an agent's liveness: only changes
// (registered, missing or back, health flipped) are committed, never beats.
type AgentRecord struct {
	Registered   bool      `json:"registered"`
	Address      string    `json:"address,omitempty"`
	Missing      bool      `json:"missing"`
	Healthy      bool      `json:"healthy"`
	Kubelet      string    `json:"kubelet,omitempty"`
	Containerd   string    `json:"containerd,omitempty"`
	ChangedAt    time.Time `json:"changedAt"`
	RegisteredAt time.Time `json:"registeredAt,omitzero"`
}

// AuditEntry records an operator action that bypassed or changed policy.
type AuditEntry struct {
	Time    time.Time `json:"time"`
	Cluster string    `json:"cluster,omitempty"`
	Action  string    `json:"action"`
	Detail  string    `json:"detail,omitempty"`
}

// maxAudit bounds the replicated audit trail; older entries are dropped.
const maxAudit = 1000

func (s *state) audit(e AuditEntry) {
	s.Audit = append(s.Audit, e)
	if len(s.Audit) > maxAudit {
		s.Audit = s.Audit[len(s.Audit)-maxAudit:]
	}
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
	if r.Upgrade != nil && r.Upgrade.To == r.Spec.Version {
		for _, n := range r.Upgrade.Nodes {
			if pool == "" || n.Pool == pool {
				m[n.Version.String()]++
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
