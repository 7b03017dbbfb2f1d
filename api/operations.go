package api

import (
	"errors"
	"fmt"
	"time"
)

// OperationKind names one of the closed set of host operations an agent
// accepts. The agent never runs anything outside this set: there is no
// "run this command" operation.
type OperationKind string

// The operation kinds. New kinds are appended; a kind is never renamed.
const (
	OpUpgradeBinary     OperationKind = "UpgradeBinary"
	OpUpgradeStaticPods OperationKind = "UpgradeStaticPods"
	OpImportImages      OperationKind = "ImportImages"
	OpPullImages        OperationKind = "PullImages"
	OpRollback          OperationKind = "Rollback"
	OpCheckArtifacts    OperationKind = "CheckArtifacts"
	OpProbePeers        OperationKind = "ProbePeers"
	// OpUpdateAgent replaces the agent itself (an upgrade's molt step).
	// Since molt 0.2.0; an older agent refuses it as unknown.
	OpUpdateAgent OperationKind = "UpdateAgent"
	// OpEtcdSnapshot takes an etcd snapshot on a control-plane host and
	// uploads it to the coordinator (an upgrade's backup step). Since
	// molt 0.2.0.
	OpEtcdSnapshot OperationKind = "EtcdSnapshot"
)

// Component names a host binary the agent can upgrade.
type Component string

// The upgradable host binaries.
const (
	ComponentKubelet    Component = "kubelet"
	ComponentContainerd Component = "containerd"
)

// Operation is one typed unit of host work with a stable ID. Exactly one of
// the body fields is set, the one that matches Kind. The same ID delivered
// twice must have no second effect on the host.
type Operation struct {
	ID   string        `json:"id"`
	Kind OperationKind `json:"kind"`
	// Upgrade is the ID of the cluster upgrade the operation belongs to
	// (its node steps, and the checks of the preflight run it waits for);
	// empty for an operation of no upgrade (a preflight run on its own) and
	// from coordinators that predate the field. The agent keeps the
	// artifacts an upgrade's CheckArtifacts verified until that upgrade
	// ends (docs/agent.md, Artifact stage).
	Upgrade           string             `json:"upgrade,omitempty"`
	UpgradeBinary     *UpgradeBinary     `json:"upgradeBinary,omitempty"`
	UpgradeStaticPods *UpgradeStaticPods `json:"upgradeStaticPods,omitempty"`
	ImportImages      *ImportImages      `json:"importImages,omitempty"`
	PullImages        *PullImages        `json:"pullImages,omitempty"`
	Rollback          *Rollback          `json:"rollback,omitempty"`
	CheckArtifacts    *CheckArtifacts    `json:"checkArtifacts,omitempty"`
	ProbePeers        *ProbePeers        `json:"probePeers,omitempty"`
	UpdateAgent       *UpdateAgent       `json:"updateAgent,omitempty"`
	EtcdSnapshot      *EtcdSnapshot      `json:"etcdSnapshot,omitempty"`
}

// EtcdSnapshot takes a snapshot of the host's etcd cluster with the
// host's etcd client credentials, from the first member that answers
// healthy, and uploads it to the coordinator
// (POST /v1/agents/{cluster}/{node}/backups?operation=<id>), which records
// it; the result's Details carry its description (DetailBackup*). Which
// etcd, and with which credentials, is the host's configuration
// (docs/backup.md).
type EtcdSnapshot struct {
	// TimeoutSeconds bounds taking and uploading the snapshot; zero means
	// the agent's default.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// Result details of an EtcdSnapshot.
const (
	DetailBackupSHA256   = "sha256"
	DetailBackupRevision = "revision"
	DetailBackupSize     = "size"
	DetailBackupMember   = "member"
)

// UpdateAgent replaces the molt-agent binary the agent runs with a
// verified download and restarts the agent's unit; the new agent reports
// the operation's result with the release it runs
// (OperationResult.Details["agentVersion"]). An agent that does not come
// up is rolled back to the kept previous binary by systemd
// (docs/agent.md, "Agents update themselves").
type UpdateAgent struct {
	Version string `json:"version"`
	URL     string `json:"url"`
	SHA256  string `json:"sha256"`
}

// DetailAgentVersion is the OperationResult.Details key under which an
// agent reports the release it runs after an UpdateAgent.
const DetailAgentVersion = "agentVersion"

// UpgradeBinary replaces a host binary with a verified download and restarts
// its unit. The previous binary is kept for Rollback.
type UpgradeBinary struct {
	Component Component `json:"component"`
	Version   string    `json:"version"`
	URL       string    `json:"url"`
	SHA256    string    `json:"sha256"`
}

// UpgradeStaticPods replaces the static-pod manifests the kubelet runs.
// Manifests maps a file name in the manifest directory to its full content;
// Images maps a container name to a new image, rewritten in place in every
// existing manifest that has a container of that name (how the coordinator
// moves a host's own, host-specific manifests to a new release). Either or
// both may be set.
type UpgradeStaticPods struct {
	Version   string            `json:"version"`
	Manifests map[string]string `json:"manifests,omitempty"`
	Images    map[string]string `json:"images,omitempty"`
	// TimeoutSeconds bounds the wait for the new pods to run and be healthy;
	// on timeout the backup is restored. Zero means the agent's default.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// ImageArchive is an OCI/Docker image tarball to import into containerd.
type ImageArchive struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// ImportImages imports image tarballs into containerd's Kubernetes namespace.
type ImportImages struct {
	Archives []ImageArchive `json:"archives"`
}

// PullImages pulls image references through containerd.
type PullImages struct {
	Refs []string `json:"refs"`
}

// Rollback undoes a finished operation of this host (restores the previous
// binary or the manifest backup).
type Rollback struct {
	OperationID string `json:"operationId"`
}

// Artifact is a download a release needs, checked by CheckArtifacts.
type Artifact struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size,omitempty"`
}

// CheckArtifacts fetches artifacts and verifies their sums, and reports
// disk space left. Used by preflight. The agent keeps what it verified in
// its artifact stage, bounded in size, when the operation belongs to an
// upgrade (Operation.Upgrade), so that the upgrade's operations do not
// fetch the same bytes again; nothing is installed.
type CheckArtifacts struct {
	Artifacts []Artifact `json:"artifacts"`
}

// ProbePeers checks TCP reachability of peer agents and API endpoints from
// this host. Used by preflight.
type ProbePeers struct {
	Addresses []string `json:"addresses"`
}

// ErrInvalidOperation is wrapped by Validate's errors.
var ErrInvalidOperation = errors.New("invalid operation")

// Validate checks that the operation is one of the known kinds with exactly
// the matching body set and its required fields present.
func (o Operation) Validate() error {
	if o.ID == "" {
		return fmt.Errorf("%w: id is empty", ErrInvalidOperation)
	}
	set := 0
	for _, b := range []bool{o.UpgradeBinary != nil, o.UpgradeStaticPods != nil, o.ImportImages != nil,
		o.PullImages != nil, o.Rollback != nil, o.CheckArtifacts != nil, o.ProbePeers != nil, o.UpdateAgent != nil, o.EtcdSnapshot != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("%w: %s: want exactly one body, have %d", ErrInvalidOperation, o.ID, set)
	}
	var ok bool
	switch o.Kind {
	case OpUpgradeBinary:
		b := o.UpgradeBinary
		ok = b != nil && (b.Component == ComponentKubelet || b.Component == ComponentContainerd) &&
			b.URL != "" && len(b.SHA256) == 64 && b.Version != ""
	case OpUpgradeStaticPods:
		ok = o.UpgradeStaticPods != nil && len(o.UpgradeStaticPods.Manifests)+len(o.UpgradeStaticPods.Images) > 0
	case OpImportImages:
		ok = o.ImportImages != nil && len(o.ImportImages.Archives) > 0
	case OpPullImages:
		ok = o.PullImages != nil && len(o.PullImages.Refs) > 0
	case OpRollback:
		ok = o.Rollback != nil && o.Rollback.OperationID != ""
	case OpCheckArtifacts:
		ok = o.CheckArtifacts != nil
	case OpProbePeers:
		ok = o.ProbePeers != nil
	case OpUpdateAgent:
		u := o.UpdateAgent
		ok = u != nil && u.Version != "" && u.URL != "" && len(u.SHA256) == 64
	case OpEtcdSnapshot:
		ok = o.EtcdSnapshot != nil
	default:
		return fmt.Errorf("%w: %s: unknown kind %q", ErrInvalidOperation, o.ID, o.Kind)
	}
	if !ok {
		return fmt.Errorf("%w: %s: %s body missing or incomplete", ErrInvalidOperation, o.ID, o.Kind)
	}
	return nil
}

// OperationState is where an operation is on its host.
type OperationState string

// Operation states as the agent reports them.
const (
	OpRunning   OperationState = "running"
	OpSucceeded OperationState = "succeeded"
	OpFailed    OperationState = "failed"
)

// OperationResult is what an agent reports for an operation. A result for an
// ID the coordinator already recorded as finished is acknowledged and
// ignored, so reporting twice is harmless.
type OperationResult struct {
	ID         string            `json:"id"`
	Kind       OperationKind     `json:"kind,omitempty"`
	State      OperationState    `json:"state"`
	Message    string            `json:"message,omitempty"`
	StartedAt  time.Time         `json:"startedAt,omitzero"`
	FinishedAt time.Time         `json:"finishedAt,omitzero"`
	Details    map[string]string `json:"details,omitempty"`
}
