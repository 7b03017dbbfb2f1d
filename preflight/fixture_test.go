package preflight_test

import (
	"strings"
	"time"

	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

// now is the fixed time of every pure test run.
var now = time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)

var sum = strings.Repeat("ab", 32)

func cluster(kind phases.ClusterKind) phases.ClusterSpec {
	c := phases.ClusterSpec{
		Name: "c1", Kind: kind, Version: phases.MustParseVersion("1.33.2"),
		Pools: []phases.Pool{
			{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: "cp-1"}}},
			{Name: "workers", Role: phases.RoleWorker, Nodes: []phases.Node{{Name: "w-2"}, {Name: "w-1"}}},
		},
	}
	if kind == phases.KindUser {
		c.AdminCluster = "admin-1"
	}
	return c
}

var allNodes = []string{"cp-1", "w-1", "w-2"}

// release is the catalog entry of 1.34.1 as the checks read it
// (api/convert.PreflightRelease of the wire's entry).
func release() *preflight.Release {
	return &preflight.Release{
		Version: "1.34.1",
		Artifacts: []preflight.Artifact{
			{Name: "kubelet", URL: "https://mirror.example/kubelet-1.34.1", SHA256: sum},
			{Name: "containerd", URL: "https://mirror.example/containerd-2.1.4", SHA256: sum},
			{Name: "image-0", URL: "https://mirror.example/images-1.34.1.tar", SHA256: sum},
		},
	}
}

// goodInput is an input on which every check passes.
func goodInput() preflight.Input {
	in := preflight.Input{
		Cluster: cluster(phases.KindStandalone),
		Current: phases.MustParseVersion("1.33.2"),
		Target:  phases.MustParseVersion("1.34.1"),
		Release: release(),
		Agents:  map[string]preflight.Agent{},
		Now:     now, HeartbeatGrace: 30 * time.Second,
		Nodes: map[string]preflight.NodeInfo{},
		ControlPlane: preflight.ControlPlaneHealth{
			Ready: true, Passed: []string{"etcd", "etcd-readiness", "ping"},
		},
		BlockingPDBs:  []preflight.PDBInfo{},
		ProtectedPods: []preflight.ProtectedPod{},
		DeprecatedAPIs: []preflight.DeprecatedAPI{
			{Group: "flowcontrol.apiserver.k8s.io", Version: "v1beta3", Resource: "flowschemas", RemovedRelease: "1.35"},
		},
		HostChecks: map[string]preflight.HostCheck{},
	}
	for _, s := range []preflight.Source{preflight.SourceNodes, preflight.SourceControlPlane, preflight.SourcePDBs, preflight.SourceProtectedPods, preflight.SourceDeprecatedAPIs} {
		in.SetGathered(s, nil)
	}
	for _, n := range allNodes {
		in.Agents[n] = preflight.Agent{Registered: true, Healthy: true, LastSeen: now.Add(-5 * time.Second)}
		in.Nodes[n] = preflight.NodeInfo{Ready: true, KubeletVersion: "v1.33.2"}
		in.HostChecks[n] = preflight.HostCheck{
			ArtifactsChecked: true, ArtifactsOK: true,
			FreeBytes:   map[string]uint64{"/var/lib/molt": 10 << 30, "/usr/local/bin": 8 << 30},
			PeersProbed: true,
		}
	}
	return in
}

// with returns goodInput changed by f.
func with(f func(in *preflight.Input)) preflight.Input {
	in := goodInput()
	f(&in)
	return in
}

func setHost(in *preflight.Input, node string, f func(h *preflight.HostCheck)) {
	h := in.HostChecks[node]
	f(&h)
	in.HostChecks[node] = h
}

func setAgent(in *preflight.Input, node string, f func(a *preflight.Agent)) {
	a := in.Agents[node]
	f(&a)
	in.Agents[node] = a
}
