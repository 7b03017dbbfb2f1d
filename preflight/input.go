package preflight

import (
	"slices"
	"time"

	"github.com/moltproject/molt/phases"
)

// DefaultHeartbeatGrace is how old an agent's last heartbeat may be when
// Input.HeartbeatGrace is zero; it matches the coordinator's default
// MissingAfter (three missed 10 s beats).
const DefaultHeartbeatGrace = 30 * time.Second

// DefaultMinFreeBytes is the free space every host must have on the
// filesystems the agent reports when Input.MinFreeBytes is zero and the
// agent reported no larger requirement: room for a kubelet and a containerd
// beside the previous ones (kept for rollback) and for image archives.
const DefaultMinFreeBytes uint64 = 2 << 30

// Input is everything the checks look at. The coordinator gathers it at the
// edges; the checks only read it.
type Input struct {
	// Cluster is the registered cluster; its pools name the nodes checked.
	Cluster phases.ClusterSpec
	// Current is the version the cluster runs; Target the one requested.
	Current phases.Version
	Target  phases.Version
	// AdminVersion is the version of the admin cluster of a user cluster;
	// zero for other kinds or when the admin cluster is unknown.
	AdminVersion phases.Version
	// UserClusters are the clusters an admin (or hybrid) cluster manages.
	UserClusters []phases.ClusterVersion
	// Release is the catalog entry of Target; nil when it is not in the
	// catalog.
	Release *Release
	// Agents is what the coordinator knows of each node's agent, by node
	// name. A node without an entry has no registered agent.
	Agents map[string]Agent
	// Now is the time of the run; HeartbeatGrace how old an agent's last
	// heartbeat may be (zero means DefaultHeartbeatGrace).
	Now            time.Time
	HeartbeatGrace time.Duration
	// MinFreeBytes is the least free space a host must report (zero means
	// DefaultMinFreeBytes).
	MinFreeBytes uint64

	// Nodes are the Node objects read from the API server, by name; a node
	// of the spec that is absent does not exist there. Valid only when
	// SourceNodes was gathered.
	Nodes map[string]NodeInfo
	// ControlPlane is the API server's /readyz answer. Valid only when
	// SourceControlPlane was gathered.
	ControlPlane ControlPlaneHealth
	// BlockingPDBs are the budgets that would refuse an eviction now. Valid
	// only when SourcePDBs was gathered.
	BlockingPDBs []PDBInfo
	// ProtectedPods are the pods an automatic drain would leave alone.
	// Valid only when SourceProtectedPods was gathered.
	ProtectedPods []ProtectedPod
	// DeprecatedAPIs are the deprecated APIs the API server has served
	// since it started (its apiserver_requested_deprecated_apis metric).
	// Valid only when SourceDeprecatedAPIs was gathered.
	DeprecatedAPIs []DeprecatedAPI
	// Automatic is set when the run is the first step of an automatic
	// upgrade: checks that only warn an operator (deprecated APIs) block
	// what nobody is watching.
	Automatic bool
	// Gathered records, for each API-server source, the outcome of reading
	// it: the empty string when it was read, the reason when reading
	// failed. A source that is absent was not gathered. A nil slice cannot
	// tell "none" from "not read", hence this explicit record.
	Gathered map[Source]string

	// HostChecks are the agents' preflight results, by node name; a node
	// without an entry has reported nothing yet.
	HostChecks map[string]HostCheck
}

// Source names data read from a cluster's API server.
type Source string

// API-server sources.
const (
	SourceNodes         Source = "nodes"
	SourceControlPlane  Source = "controlPlane"
	SourcePDBs          Source = "pdbs"
	SourceProtectedPods Source = "protectedPods"
	// SourceDeprecatedAPIs is the API server's /metrics.
	SourceDeprecatedAPIs Source = "deprecatedAPIs"
)

// DeprecatedAPI is a deprecated API that clients requested from the API
// server, as its apiserver_requested_deprecated_apis metric names it.
type DeprecatedAPI struct {
	Group       string
	Version     string
	Resource    string
	Subresource string
	// RemovedRelease is the release that no longer serves it ("1.37");
	// empty when the API server does not say.
	RemovedRelease string
}

// String names the API as group/version/resource[/subresource] ("v1" for
// the core group).
func (a DeprecatedAPI) String() string {
	s := a.Version + "/" + a.Resource
	if a.Group != "" {
		s = a.Group + "/" + s
	}
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	return s
}

// SetGathered records the outcome of reading s: nil means it was read.
func (in *Input) SetGathered(s Source, err error) {
	if in.Gathered == nil {
		in.Gathered = map[Source]string{}
	}
	reason := ""
	if err != nil {
		reason = err.Error()
		if reason == "" {
			reason = "unknown error"
		}
	}
	in.Gathered[s] = reason
}

// gap says why s cannot be used, or "" when it was read.
func (in Input) gap(s Source) string {
	reason, ok := in.Gathered[s]
	switch {
	case !ok:
		return string(s) + " were not gathered from the API server"
	case reason != "":
		return "reading " + string(s) + " from the API server failed: " + reason
	}
	return ""
}

// NodeNames returns the names of every node of the cluster's pools, sorted.
func NodeNames(c phases.ClusterSpec) []string {
	var out []string
	for _, p := range c.Pools {
		for _, n := range p.Nodes {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// NodeInfo is a Node object as the API server reports it.
type NodeInfo struct {
	// Ready is the Ready condition being True.
	Ready bool
	// KubeletVersion is status.nodeInfo.kubeletVersion, e.g. "v1.34.4".
	KubeletVersion string
}

// ControlPlaneHealth is the API server's verbose /readyz answer.
type ControlPlaneHealth struct {
	// Ready is true when /readyz answered 200.
	Ready bool
	// Passed and Failing are the names of the individual readiness checks
	// (e.g. "etcd", "etcd-readiness", "informer-sync"), sorted.
	Passed  []string
	Failing []string
	// Message is a short summary of the answer (status and last line).
	Message string
}

// HostCheck is what one host's agent reported for the preflight operations
// (see HostCheckFromResults).
type HostCheck struct {
	// ArtifactsChecked is true once a finished CheckArtifacts result came.
	ArtifactsChecked bool
	// ArtifactsOK is true when every artifact downloaded and its sha256
	// (and size, when given) matched.
	ArtifactsOK bool
	// FailedArtifacts maps an artifact's name to the agent's error.
	FailedArtifacts map[string]string
	// ArtifactsMessage is the agent's message when CheckArtifacts failed.
	ArtifactsMessage string
	// FreeBytes is the free space per filesystem path the agent measured.
	FreeBytes map[string]uint64
	// RequiredBytes is the space the agent says the upgrade needs; zero
	// when it did not say.
	RequiredBytes uint64

	// PeersProbed is true once a finished ProbePeers result came.
	PeersProbed bool
	// Unreachable maps each address the host could not reach (a peer agent
	// or the API endpoint) to the dial error.
	Unreachable map[string]string
	// ProbeMessage is the agent's message when ProbePeers failed.
	ProbeMessage string
}

// PDBInfo is a PodDisruptionBudget that allows no disruption right now and
// covers pods on nodes to be drained.
type PDBInfo struct {
	Namespace string
	Name      string
	// Nodes are the nodes holding its pods, sorted.
	Nodes []string
	// Pods are the covered pods on those nodes, sorted.
	Pods []string
}

// ProtectedPod is a pod opted out of eviction (safe-to-evict=false) that
// an automatic upgrade leaves alone until EvictableAt (SPEC §8).
type ProtectedPod struct {
	Namespace   string
	Name        string
	Node        string
	EvictableAt time.Time
}
