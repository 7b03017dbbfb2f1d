package preflight

import "time"

// Release is what the checks read of the target's catalog entry: its
// version and what hosts download for it. api/convert builds it from the
// catalog's wire type (api.Release), so that this package knows nothing of
// the wire.
type Release struct {
	// Version is the entry's version as the catalog writes it ("1.34.1").
	Version string
	// Artifacts are what hosts download, named as CheckArtifacts names
	// them: "kubelet", "containerd", "image-0", …. A component the entry
	// gives neither a URL nor a sum for is absent; one without a URL is
	// present, so that release-in-catalog can name it (HostOperations
	// leaves it out).
	Artifacts []Artifact
}

// Artifact is one download of a release and the SHA-256 it must have.
type Artifact struct {
	Name, URL, SHA256 string
}

// Agent is what the coordinator knows of a node's agent.
type Agent struct {
	Registered, Missing, Healthy bool
	// LastSeen is the agent's last heartbeat the leader saw; zero when
	// it saw none.
	LastSeen time.Time
}

// Artifact names of a release's binaries (see Release.Artifacts).
const (
	ArtifactKubelet    = "kubelet"
	ArtifactContainerd = "containerd"
)
