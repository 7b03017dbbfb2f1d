package statemachine

import (
	"slices"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
)

// Persisted form of a release catalog entry (see persisted.go:
// append-only). The state keeps api.Release, the API's wire type; its
// JSON is a contract of its own, but the log's is this one.

type releaseV1 struct {
	Version      string              `json:"version"`
	EndOfSupport time.Time           `json:"endOfSupport,omitzero"`
	Channels     []string            `json:"channels,omitempty"`
	Components   releaseComponentsV1 `json:"components"`
	// Agent was added in molt 0.2.0 (SinceAgentUpdate); absent before.
	Agent *agentArtifactV1 `json:"agent,omitempty"`
}

type releaseComponentsV1 struct {
	Kubelet    binaryArtifactV1  `json:"kubelet"`
	Containerd binaryArtifactV1  `json:"containerd"`
	StaticPods map[string]string `json:"staticPods,omitempty"`
	Images     []imageArchiveV1  `json:"images,omitempty"`
	// Addons were added later: entries before them decode none.
	Addons []addonManifestV1 `json:"addons,omitempty"`
}

type addonManifestV1 struct {
	Name string `json:"name"`
	YAML string `json:"yaml"`
}

type binaryArtifactV1 struct {
	URL     string `json:"url"`
	SHA256  string `json:"sha256"`
	Version string `json:"version,omitempty"`
}

type imageArchiveV1 struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

func releaseToV1(r api.Release) releaseV1 {
	c := r.Components
	return releaseV1{Version: r.Version, EndOfSupport: r.EndOfSupport, Channels: slices.Clone(r.Channels),
		Components: releaseComponentsV1{Kubelet: binaryArtifactV1(c.Kubelet), Containerd: binaryArtifactV1(c.Containerd),
			StaticPods: conv.Map(c.StaticPods, conv.Same[string]), Images: conv.Slice(c.Images, imageArchiveToV1),
			Addons: conv.Slice(c.Addons, addonManifestToV1)}, Agent: conv.Ptr(r.Agent, agentArtifactToV1)}
}

func releaseFromV1(r releaseV1) api.Release {
	c := r.Components
	return api.Release{Version: r.Version, EndOfSupport: r.EndOfSupport, Channels: slices.Clone(r.Channels),
		Components: api.ReleaseComponents{Kubelet: api.BinaryArtifact(c.Kubelet), Containerd: api.BinaryArtifact(c.Containerd),
			StaticPods: conv.Map(c.StaticPods, conv.Same[string]), Images: conv.Slice(c.Images, imageArchiveFromV1),
			Addons: conv.Slice(c.Addons, addonManifestFromV1)}, Agent: conv.Ptr(r.Agent, agentArtifactFromV1)}
}

func imageArchiveToV1(a api.ImageArchive) imageArchiveV1 {
	return imageArchiveV1{URL: a.URL, SHA256: a.SHA256}
}
func imageArchiveFromV1(a imageArchiveV1) api.ImageArchive {
	return api.ImageArchive{URL: a.URL, SHA256: a.SHA256}
}

func addonManifestToV1(a api.AddonManifest) addonManifestV1 {
	return addonManifestV1{Name: a.Name, YAML: a.YAML}
}
func addonManifestFromV1(a addonManifestV1) api.AddonManifest {
	return api.AddonManifest{Name: a.Name, YAML: a.YAML}
}
