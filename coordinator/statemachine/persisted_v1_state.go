package statemachine

import (
	"slices"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
)

// Persisted form of the whole state, a snapshot's body (see persisted.go:
// append-only; snapshot.go frames it). Where a V1 type has exactly the
// fields of the record it stores (agents, audit entries), Go converts one
// into the other, and the conversion stops compiling the day they differ.

type stateV1 struct {
	Clusters map[string]*clusterRecordV1 `json:"clusters"`
	Releases map[string]*releaseV1       `json:"releases"`
	Audit    []auditEntryV1              `json:"audit,omitempty"`
	Tokens   map[string]*tokenRecordV1   `json:"tokens,omitempty"`
	// AuditLog, AgentAuditLog and AuditSeq are the audit log (audit.go).
	AuditLog      []auditRecordV1 `json:"auditLog,omitempty"`
	AgentAuditLog []auditRecordV1 `json:"agentAuditLog,omitempty"`
	AuditSeq      uint64          `json:"auditSeq,omitempty"`
	// Channels were added with automatic upgrades; absent before.
	Channels map[string]*channelV1 `json:"channels,omitempty"`
	// Members was added in 0.2.0 (members.go); absent before the first
	// record.
	Members map[string]memberCapabilitiesV1 `json:"members,omitempty"`
	// Sequences were added in 0.2.0 (sequences.go); absent before the
	// first.
	Sequences map[string]*sequenceV1 `json:"sequences,omitempty"`
}

type clusterRecordV1 struct {
	Spec             clusterSpecV1             `json:"spec"`
	Kubeconfig       string                    `json:"kubeconfig,omitempty"`
	StatusVersion    string                    `json:"statusVersion"`
	AddonsVersion    string                    `json:"addonsVersion"`
	LifecycleVersion string                    `json:"lifecycleVersion"`
	Upgrade          *upgradeV1                `json:"upgrade,omitempty"`
	History          []upgradeSummaryV1        `json:"history,omitempty"`
	Seq              int                       `json:"seq"`
	Agents           map[string]*agentRecordV1 `json:"agents,omitempty"`
	Policy           *policyV1                 `json:"policy,omitempty"`
	Preflights       []*preflightRunV1         `json:"preflights,omitempty"`
	PreflightSeq     int                       `json:"preflightSeq"`
	AgentCerts       map[string][]string       `json:"agentCerts,omitempty"`
	KubeconfigSealed string                    `json:"kubeconfigSealed,omitempty"`
	// Auto was added with automatic upgrades; absent before (no attempt).
	Auto *autoStateV1 `json:"auto,omitempty"`
	// Backups were added with the backup step (0.2.0); absent before.
	Backups []backupV1 `json:"backups,omitempty"`
}

type agentRecordV1 struct {
	Registered   bool      `json:"registered"`
	Address      string    `json:"address,omitempty"`
	Missing      bool      `json:"missing"`
	Healthy      bool      `json:"healthy"`
	Kubelet      string    `json:"kubelet,omitempty"`
	Containerd   string    `json:"containerd,omitempty"`
	ChangedAt    time.Time `json:"changedAt"`
	RegisteredAt time.Time `json:"registeredAt,omitzero"`
	// StaticPods was added with observed static pods (0.2.0); absent
	// before and when none was reported.
	StaticPods map[string]string `json:"staticPods,omitempty"`
}

type auditEntryV1 struct {
	Time    time.Time `json:"time"`
	Cluster string    `json:"cluster,omitempty"`
	Action  string    `json:"action"`
	Detail  string    `json:"detail,omitempty"`
}

func stateToV1(s *state) stateV1 {
	return stateV1{
		Clusters: conv.Map(s.Clusters, func(r *ClusterRecord) *clusterRecordV1 { return conv.Ptr(r, clusterRecordToV1) }),
		Releases: conv.Map(s.Releases, func(r *api.Release) *releaseV1 { return conv.Ptr(r, releaseToV1) }),
		Audit:    conv.Slice(s.Audit, func(e AuditEntry) auditEntryV1 { return auditEntryV1(e) }),
		Tokens:   conv.Map(s.Tokens, func(t *TokenRecord) *tokenRecordV1 { return conv.Ptr(t, tokenRecordToV1) }),

		AuditLog:      conv.Slice(s.AuditLog, auditRecordToV1),
		AgentAuditLog: conv.Slice(s.AgentAuditLog, auditRecordToV1),
		AuditSeq:      s.AuditSeq,
		Channels:      conv.Map(s.Channels, func(c *ChannelRecord) *channelV1 { return conv.Ptr(c, channelToV1) }),
		Members:       membersToV1(s.Members),
		Sequences:     conv.Map(s.Sequences, func(r *SequenceRecord) *sequenceV1 { return conv.Ptr(r, sequenceToV1) }),
	}
}

func (d *v1Decoder) state(s stateV1) *state {
	st := &state{
		Clusters: conv.Map(s.Clusters, func(r *clusterRecordV1) *ClusterRecord { return conv.Ptr(r, d.clusterRecord) }),
		Releases: conv.Map(s.Releases, func(r *releaseV1) *api.Release { return conv.Ptr(r, releaseFromV1) }),
		Audit:    conv.Slice(s.Audit, func(e auditEntryV1) AuditEntry { return AuditEntry(e) }),
		Tokens:   conv.Map(s.Tokens, func(t *tokenRecordV1) *TokenRecord { return conv.Ptr(t, tokenRecordFromV1) }),

		AuditLog:      conv.Slice(s.AuditLog, auditRecordFromV1),
		AgentAuditLog: conv.Slice(s.AgentAuditLog, auditRecordFromV1),
		AuditSeq:      s.AuditSeq,
		Channels:      conv.Map(s.Channels, func(c *channelV1) *ChannelRecord { return conv.Ptr(c, d.channel) }),
		Members:       membersFromV1(s.Members),
		Sequences:     conv.Map(s.Sequences, func(r *sequenceV1) *SequenceRecord { return conv.Ptr(r, d.sequence) }),
	}
	if st.Tokens == nil { // snapshots from before tokens
		st.Tokens = map[string]*TokenRecord{}
	}
	return st
}

func clusterRecordToV1(r ClusterRecord) clusterRecordV1 {
	return clusterRecordV1{
		Spec: clusterSpecToV1(r.Spec), Kubeconfig: r.Kubeconfig, KubeconfigSealed: r.KubeconfigSealed,
		StatusVersion: r.StatusVersion.String(), AddonsVersion: r.AddonsVersion.String(), LifecycleVersion: r.LifecycleVersion.String(),
		Upgrade: conv.Ptr(r.Upgrade, upgradeToV1), History: conv.Slice(r.History, upgradeSummaryToV1), Seq: r.Seq,
		Agents:       conv.Map(r.Agents, func(a *AgentRecord) *agentRecordV1 { return conv.Ptr(a, agentRecordToV1) }),
		Policy:       conv.Ptr(r.Policy, policyToV1),
		Preflights:   conv.Slice(r.Preflights, func(p *PreflightRun) *preflightRunV1 { return conv.Ptr(p, preflightRunToV1) }),
		PreflightSeq: r.PreflightSeq,
		AgentCerts:   conv.Map(r.AgentCerts, slices.Clone[[]string]),
		Auto:         autoStateToV1(r.Auto),
		Backups:      conv.Slice(r.Backups, backupToV1),
	}
}

func (d *v1Decoder) clusterRecord(r clusterRecordV1) ClusterRecord {
	return ClusterRecord{
		Spec: d.clusterSpec(r.Spec), Kubeconfig: r.Kubeconfig, KubeconfigSealed: r.KubeconfigSealed,
		StatusVersion: d.version(r.StatusVersion), AddonsVersion: d.version(r.AddonsVersion), LifecycleVersion: d.version(r.LifecycleVersion),
		Upgrade: conv.Ptr(r.Upgrade, d.upgrade), History: conv.Slice(r.History, upgradeSummaryFromV1), Seq: r.Seq,
		Agents:       conv.Map(r.Agents, func(a *agentRecordV1) *AgentRecord { return conv.Ptr(a, agentRecordFromV1) }),
		Policy:       conv.Ptr(r.Policy, policyFromV1),
		Preflights:   conv.Slice(r.Preflights, func(p *preflightRunV1) *PreflightRun { return conv.Ptr(p, d.preflightRun) }),
		PreflightSeq: r.PreflightSeq,
		AgentCerts:   conv.Map(r.AgentCerts, slices.Clone[[]string]),
		Auto:         d.autoState(r.Auto),
		Backups:      conv.Slice(r.Backups, backupFromV1),
	}
}

func agentRecordToV1(a AgentRecord) agentRecordV1   { return agentRecordV1(a) }
func agentRecordFromV1(a agentRecordV1) AgentRecord { return AgentRecord(a) }
