package api

import "time"

// The resource types are the wire's own: versions travel as "1.N.X"
// strings, and cluster shapes (cluster_spec.go), upgrades (upgrade.go) and
// plans (plan.go) are declared here rather than borrowed from the engine
// (package phases), so that the engine may change its structs without
// changing the API. Package api/convert converts between the two.

// BinaryArtifact is a downloadable host binary.
type BinaryArtifact struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
	// Version is the component's own version (containerd's), when it has one.
	Version string `json:"version,omitempty"`
}

// ReleaseComponents are the artifacts of a release.
type ReleaseComponents struct {
	Kubelet    BinaryArtifact `json:"kubelet"`
	Containerd BinaryArtifact `json:"containerd"`
	// StaticPods maps a static pod's container name to its image.
	StaticPods map[string]string `json:"staticPods,omitempty"`
	// Images are image archives every host imports before its upgrade (for
	// sites without a registry).
	Images []ImageArchive `json:"images,omitempty"`
	// Addons are the cluster add-ons of the release (kube-proxy, cluster
	// DNS, ...), applied by the upgrade's add-ons step with server-side
	// apply once the control plane runs the release, in this order.
	Addons []AddonManifest `json:"addons,omitempty"`
}

// AddonManifest is one add-on of a release: its objects as one YAML
// stream (documents separated by "---").
type AddonManifest struct {
	// Name identifies the add-on in the release ("kube-proxy").
	Name string `json:"name"`
	// YAML holds the add-on's objects; each is applied as it is written.
	YAML string `json:"yaml"`
}

// Release is one entry of the release catalog (SPEC §2).
type Release struct {
	Version      string            `json:"version"`
	EndOfSupport time.Time         `json:"endOfSupport,omitzero"`
	Channels     []string          `json:"channels,omitempty"`
	Components   ReleaseComponents `json:"components"`
	// Agent is the molt-agent release an upgrade to this release brings
	// every host to first, in its molt step (docs/agent.md, "Agents update
	// themselves"); absent: the release names none, and upgrades to it
	// leave the agents as they are. Since molt 0.2.0.
	Agent *AgentArtifact `json:"agent,omitempty"`
}

// AgentArtifact is a molt-agent release: its version (molt's semver, as
// molt-agent --version prints it), where to download the binary (an
// absolute http(s) URL, or an /artifacts/ path the coordinator serves)
// and the binary's sha256 (64 hex digits).
type AgentArtifact struct {
	Version string `json:"version"`
	URL     string `json:"url"`
	SHA256  string `json:"sha256"`
}

// PoolStatus is the status of one pool: how many nodes run each version.
type PoolStatus struct {
	Name     string         `json:"name"`
	Versions map[string]int `json:"versions"`
}

// AgentStatus is what the coordinator knows of a node's agent.
type AgentStatus struct {
	Node       string    `json:"node"`
	Registered bool      `json:"registered"`
	Missing    bool      `json:"missing"`
	Healthy    bool      `json:"healthy"`
	Kubelet    string    `json:"kubeletVersion,omitempty"`
	Containerd string    `json:"containerdVersion,omitempty"`
	LastSeen   time.Time `json:"lastSeen,omitzero"`
	// AgentVersion is the molt release the node's agent last said it runs,
	// as the member that answers heard it (the leader hears every agent's
	// beats; a follower only those it served); absent when unknown.
	AgentVersion string `json:"agentVersion,omitempty"`
	// Drift says how the versions this node reports differ from what
	// molt recorded for it (upgraded by hand, reimaged, rolled back);
	// absent when they agree or the node has not reported. A drifted
	// node holds automatic upgrades back (UpgradeStatus.BlockedBy, kind
	// "drift").
	Drift string `json:"drift,omitempty"`
	// StaticPods is the image of each static pod the node's agent last
	// reported running, by pod name without the node's suffix
	// ("kube-apiserver", "etcd"); absent when none runs, or while a
	// member runs a molt before 0.2.0 (which cannot read them).
	StaticPods map[string]string `json:"staticPods,omitempty"`
}

// ObservedVersions is what the nodes' agents report, per component.
type ObservedVersions struct {
	Kubelet    *ObservedComponent `json:"kubelet,omitempty"`
	Containerd *ObservedComponent `json:"containerd,omitempty"`
}

// ObservedComponent is one component as the nodes report it.
type ObservedComponent struct {
	// Version is the lowest version a node reports.
	Version string `json:"version"`
	// Nodes counts the nodes reporting each version.
	Nodes map[string]int `json:"nodes"`
	// LastSeen is when Version was last reported: the latest beat of a
	// node at it that the answering member heard, else when that node's
	// report last changed in the replicated state.
	LastSeen time.Time `json:"lastSeen,omitzero"`
}

// UpgradeSummary is a finished upgrade in a cluster's history.
type UpgradeSummary struct {
	ID         string       `json:"id"`
	From       string       `json:"from"`
	To         string       `json:"to"`
	State      UpgradeState `json:"state"`
	CreatedAt  time.Time    `json:"createdAt"`
	FinishedAt time.Time    `json:"finishedAt,omitzero"`
}

// ClusterStatus is what really runs (SPEC §2).
type ClusterStatus struct {
	// Version is what the nodes run: the lowest kubelet version their
	// agents report (Observed.Kubelet.Version) once one has reported,
	// else molt's record (RecordedVersion).
	Version string `json:"version"`
	// RecordedVersion is molt's record of the cluster's version, set to
	// spec.version only when every component has been upgraded and the
	// final health checks passed; given only when it differs from
	// Version (the nodes drifted from the record).
	RecordedVersion string `json:"recordedVersion,omitempty"`
	// Observed is what the nodes' agents report, with when each version
	// was last seen; absent before any agent reported.
	Observed                     *ObservedVersions `json:"observed,omitempty"`
	Versions                     map[string]int    `json:"versions"`
	ControlPlaneNodepoolStatus   PoolStatus        `json:"controlPlaneNodepoolStatus"`
	ControlPlaneLBNodepoolStatus PoolStatus        `json:"controlPlaneLBNodepoolStatus,omitzero"`
	AppliedManifestsVersion      string            `json:"appliedManifestsVersion,omitempty"`
	Upgrade                      *Upgrade          `json:"upgrade,omitempty"`
	History                      []UpgradeSummary  `json:"history,omitempty"`
	Agents                       []AgentStatus     `json:"agents,omitempty"`
}

// Cluster is a cluster's spec and status.
type Cluster struct {
	Spec   ClusterSpec   `json:"spec"`
	Status ClusterStatus `json:"status"`
}

// UpgradeRequest starts (or, with DryRun, plans) an upgrade.
type UpgradeRequest struct {
	Version string `json:"version"`
	DryRun  bool   `json:"dryRun,omitempty"`
	// Automatic marks an upgrade started by policy rather than by a person:
	// it waits for maintenance windows and honours pod protections.
	Automatic bool `json:"automatic,omitempty"`
	// ConcurrentWorkerPools lets worker pools upgrade side by side.
	ConcurrentWorkerPools int `json:"concurrentWorkerPools,omitempty"`
	// Emergency forces a critical patch through maintenance windows and
	// exclusions. Only patch upgrades may be forced; the reason is required
	// and kept in the audit log with the authenticated caller.
	Emergency *Emergency `json:"emergency,omitempty"`
}

// Emergency is an operator's override of maintenance policy.
type Emergency struct {
	Reason string `json:"reason"`
	// By is accepted, so that clients that send it keep working, and
	// ignored: the audit log records who asked as authenticated, never a
	// name the request states.
	By string `json:"by,omitempty"`
}

// MaintenanceCheck answers "may this change run at that time, and if not,
// when next?".
type MaintenanceCheck struct {
	Allowed         bool      `json:"allowed"`
	BlockedBy       []string  `json:"blockedBy"`
	PauseReason     string    `json:"pauseReason,omitempty"`
	NextOpportunity time.Time `json:"nextOpportunity,omitzero"`
	// WindowEnds is when the open stretch of the window containing the
	// instant closes (capped 7 days ahead); absent outside the window or
	// without one.
	WindowEnds time.Time `json:"windowEnds,omitzero"`
}

// Member is a coordinator Raft member.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr,omitempty"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
	// Version and Commit are the molt release the member runs; absent
	// when it is unknown (the member did not answer, or runs a release
	// before 0.2.0, which does not say: it is taken to be 0.1.0).
	Version string `json:"version,omitempty"`
	Commit  string `json:"commit,omitempty"`
	// Capabilities is what the member can read; absent when unknown.
	Capabilities *MemberCapabilities `json:"capabilities,omitempty"`
	// CapabilitiesFrom says where the answering member learnt them:
	// "self" (the member itself), "member" (the leader asked it),
	// "record" (the replicated membership), "assumed" (unknown: molt
	// 0.1.0 is assumed; Capabilities is absent).
	CapabilitiesFrom string `json:"capabilitiesFrom,omitempty"`
	// Reason, when present, says why the member cannot keep up with the
	// log, e.g. "needs molt ≥ 0.2.0" (docs/mixed-versions.md).
	Reason string `json:"reason,omitempty"`
}

// MemberCapabilities is what a coordinator member can read, derived from
// its binary: the leader writes a command, a field, a snapshot format or
// a step layout only once every member reads it (docs/mixed-versions.md).
type MemberCapabilities struct {
	// Version is the member's molt release (semver, no "v"); Commit the
	// source commit, "" when unknown.
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	// Command is the newest coordinator command number the member
	// registers; RaftCommand the newest of the replicated store's own.
	Command     int `json:"command"`
	RaftCommand int `json:"raftCommand"`
	// StateSnapshot and RaftSnapshot are the newest snapshot formats it
	// reads: the coordinator state's and the replicated store's file.
	StateSnapshot int `json:"stateSnapshot"`
	RaftSnapshot  int `json:"raftSnapshot"`
	// StepLayout is the newest upgrade step layout it knows.
	StepLayout int `json:"stepLayout"`
}

// MemberSelf is a member's answer about itself (GET
// /v1/members/self/capabilities, members only): what it can read and,
// when it stopped applying its log, why.
type MemberSelf struct {
	ID           string             `json:"id"`
	Capabilities MemberCapabilities `json:"capabilities"`
	Reason       string             `json:"reason,omitempty"`
}

// JoinRequest adds a member (POST /v1/members).
type JoinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	HTTPAddr string `json:"httpAddr"`
	// CSR (PEM) asks for the member's certificate: the answer carries it,
	// signed by the cluster CA for the hosts of RaftAddr and HTTPAddr and
	// the CSR's own DNS names and IP addresses.
	CSR string `json:"csr,omitempty"`
}

// JoinResponse answers a join: the member's certificate and the CA it
// serves and signs with (admin only; the CA key lets the member sign
// agents' certificates when it leads).
type JoinResponse struct {
	ID          string `json:"id"`
	Certificate string `json:"certificate,omitempty"`
	CA          string `json:"ca,omitempty"`
	CAKey       string `json:"caKey,omitempty"`
	// EncryptionKeys is the coordinator's key file (package seal's
	// format), which the joining member keeps as its own: every member
	// opens the kubeconfigs the others sealed.
	EncryptionKeys string `json:"encryptionKeys,omitempty"`
}
