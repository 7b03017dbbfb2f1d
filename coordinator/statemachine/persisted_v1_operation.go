package statemachine

import (
	"slices"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
)

// Persisted form of the agent operations a preflight run sends and of the
// results agents report (see persisted.go: append-only). The state keeps
// the API's wire types, api.Operation and api.OperationResult.

type operationV1 struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Upgrade was added with the agents' artifact stage. The coordinator
	// names an operation's upgrade when it hands it to the agent
	// (Coordinator.PollAgent), so entries so far leave it out; it is
	// kept so that an api.Operation goes through the log unchanged.
	Upgrade           string               `json:"upgrade,omitempty"`
	UpgradeBinary     *upgradeBinaryV1     `json:"upgradeBinary,omitempty"`
	UpgradeStaticPods *upgradeStaticPodsV1 `json:"upgradeStaticPods,omitempty"`
	ImportImages      *importImagesV1      `json:"importImages,omitempty"`
	PullImages        *pullImagesV1        `json:"pullImages,omitempty"`
	Rollback          *rollbackV1          `json:"rollback,omitempty"`
	CheckArtifacts    *checkArtifactsV1    `json:"checkArtifacts,omitempty"`
	ProbePeers        *probePeersV1        `json:"probePeers,omitempty"`
	// UpdateAgent was added with the molt step (0.2.0). No entry carries
	// one (preflight runs hold none); it is kept so that an
	// api.Operation goes through the log unchanged.
	UpdateAgent *agentArtifactV1 `json:"updateAgent,omitempty"`
	// EtcdSnapshot was added with the backup step (0.2.0). No entry
	// carries it (preflight runs do not take snapshots).
	EtcdSnapshot *etcdSnapshotV1 `json:"etcdSnapshot,omitempty"`
}

type upgradeBinaryV1 struct {
	Component string `json:"component"`
	Version   string `json:"version"`
	URL       string `json:"url"`
	SHA256    string `json:"sha256"`
}

type upgradeStaticPodsV1 struct {
	Version        string            `json:"version"`
	Manifests      map[string]string `json:"manifests,omitempty"`
	Images         map[string]string `json:"images,omitempty"`
	TimeoutSeconds int               `json:"timeoutSeconds,omitempty"`
}

type importImagesV1 struct {
	Archives []imageArchiveV1 `json:"archives"`
}

type pullImagesV1 struct {
	Refs []string `json:"refs"`
}

type rollbackV1 struct {
	OperationID string `json:"operationId"`
}

type checkArtifactsV1 struct {
	Artifacts []artifactV1 `json:"artifacts"`
}

type artifactV1 struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size,omitempty"`
}

type probePeersV1 struct {
	Addresses []string `json:"addresses"`
}

type operationResultV1 struct {
	ID         string            `json:"id"`
	Kind       string            `json:"kind,omitempty"`
	State      string            `json:"state"`
	Message    string            `json:"message,omitempty"`
	StartedAt  time.Time         `json:"startedAt,omitzero"`
	FinishedAt time.Time         `json:"finishedAt,omitzero"`
	Details    map[string]string `json:"details,omitempty"`
}

func operationToV1(o api.Operation) operationV1 {
	return operationV1{ID: o.ID, Kind: string(o.Kind), Upgrade: o.Upgrade,
		UpgradeBinary: conv.Ptr(o.UpgradeBinary, func(b api.UpgradeBinary) upgradeBinaryV1 {
			return upgradeBinaryV1{Component: string(b.Component), Version: b.Version, URL: b.URL, SHA256: b.SHA256}
		}),
		UpgradeStaticPods: conv.Ptr(o.UpgradeStaticPods, func(s api.UpgradeStaticPods) upgradeStaticPodsV1 {
			return upgradeStaticPodsV1{Version: s.Version, Manifests: conv.Map(s.Manifests, conv.Same[string]),
				Images: conv.Map(s.Images, conv.Same[string]), TimeoutSeconds: s.TimeoutSeconds}
		}),
		ImportImages: conv.Ptr(o.ImportImages, func(i api.ImportImages) importImagesV1 {
			return importImagesV1{Archives: conv.Slice(i.Archives, imageArchiveToV1)}
		}),
		PullImages: conv.Ptr(o.PullImages, func(p api.PullImages) pullImagesV1 { return pullImagesV1{Refs: slices.Clone(p.Refs)} }),
		Rollback:   conv.Ptr(o.Rollback, func(r api.Rollback) rollbackV1 { return rollbackV1{OperationID: r.OperationID} }),
		CheckArtifacts: conv.Ptr(o.CheckArtifacts, func(c api.CheckArtifacts) checkArtifactsV1 {
			return checkArtifactsV1{Artifacts: conv.Slice(c.Artifacts, func(a api.Artifact) artifactV1 {
				return artifactV1{Name: a.Name, URL: a.URL, SHA256: a.SHA256, Size: a.Size}
			})}
		}),
		ProbePeers: conv.Ptr(o.ProbePeers, func(p api.ProbePeers) probePeersV1 { return probePeersV1{Addresses: slices.Clone(p.Addresses)} }),
		UpdateAgent: conv.Ptr(o.UpdateAgent, func(u api.UpdateAgent) agentArtifactV1 {
			return agentArtifactV1{Version: u.Version, URL: u.URL, SHA256: u.SHA256}
		}),
		EtcdSnapshot: conv.Ptr(o.EtcdSnapshot, func(e api.EtcdSnapshot) etcdSnapshotV1 { return etcdSnapshotV1(e) }),
	}
}

func operationFromV1(o operationV1) api.Operation {
	return api.Operation{ID: o.ID, Kind: api.OperationKind(o.Kind), Upgrade: o.Upgrade,
		UpgradeBinary: conv.Ptr(o.UpgradeBinary, func(b upgradeBinaryV1) api.UpgradeBinary {
			return api.UpgradeBinary{Component: api.Component(b.Component), Version: b.Version, URL: b.URL, SHA256: b.SHA256}
		}),
		UpgradeStaticPods: conv.Ptr(o.UpgradeStaticPods, func(s upgradeStaticPodsV1) api.UpgradeStaticPods {
			return api.UpgradeStaticPods{Version: s.Version, Manifests: conv.Map(s.Manifests, conv.Same[string]),
				Images: conv.Map(s.Images, conv.Same[string]), TimeoutSeconds: s.TimeoutSeconds}
		}),
		ImportImages: conv.Ptr(o.ImportImages, func(i importImagesV1) api.ImportImages {
			return api.ImportImages{Archives: conv.Slice(i.Archives, imageArchiveFromV1)}
		}),
		PullImages: conv.Ptr(o.PullImages, func(p pullImagesV1) api.PullImages { return api.PullImages{Refs: slices.Clone(p.Refs)} }),
		Rollback:   conv.Ptr(o.Rollback, func(r rollbackV1) api.Rollback { return api.Rollback{OperationID: r.OperationID} }),
		CheckArtifacts: conv.Ptr(o.CheckArtifacts, func(c checkArtifactsV1) api.CheckArtifacts {
			return api.CheckArtifacts{Artifacts: conv.Slice(c.Artifacts, func(a artifactV1) api.Artifact {
				return api.Artifact{Name: a.Name, URL: a.URL, SHA256: a.SHA256, Size: a.Size}
			})}
		}),
		ProbePeers: conv.Ptr(o.ProbePeers, func(p probePeersV1) api.ProbePeers { return api.ProbePeers{Addresses: slices.Clone(p.Addresses)} }),
		UpdateAgent: conv.Ptr(o.UpdateAgent, func(u agentArtifactV1) api.UpdateAgent {
			return api.UpdateAgent{Version: u.Version, URL: u.URL, SHA256: u.SHA256}
		}),
		EtcdSnapshot: conv.Ptr(o.EtcdSnapshot, func(e etcdSnapshotV1) api.EtcdSnapshot { return api.EtcdSnapshot(e) }),
	}
}

func operationResultToV1(r api.OperationResult) operationResultV1 {
	return operationResultV1{ID: r.ID, Kind: string(r.Kind), State: string(r.State), Message: r.Message,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Details: conv.Map(r.Details, conv.Same[string])}
}

func operationResultFromV1(r operationResultV1) api.OperationResult {
	return api.OperationResult{ID: r.ID, Kind: api.OperationKind(r.Kind), State: api.OperationState(r.State), Message: r.Message,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Details: conv.Map(r.Details, conv.Same[string])}
}

type etcdSnapshotV1 struct {
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}
