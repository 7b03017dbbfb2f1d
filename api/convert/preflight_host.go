package convert

import (
	"fmt"
	"maps"
	"slices"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/preflight"
)

// The host side of a preflight run: the catalog entry the checks read,
// the operations the agents run and what they report back. The preflight
// engine has types of its own for each, so that it imports no wire type.

// PreflightRelease is what the preflight checks read of a catalog entry:
// its version and its downloads, named as the agent's CheckArtifacts
// names them ("kubelet", "containerd", "image-0", …). A binary the entry
// gives neither a URL nor a sum for is left out.
func PreflightRelease(r api.Release) preflight.Release {
	c := r.Components
	out := preflight.Release{Version: r.Version, Artifacts: []preflight.Artifact{}}
	if c.Kubelet.URL != "" || c.Kubelet.SHA256 != "" {
		out.Artifacts = append(out.Artifacts, preflight.Artifact{Name: string(api.ComponentKubelet), URL: c.Kubelet.URL, SHA256: c.Kubelet.SHA256})
	}
	if c.Containerd.URL != "" || c.Containerd.SHA256 != "" {
		out.Artifacts = append(out.Artifacts, preflight.Artifact{Name: string(api.ComponentContainerd), URL: c.Containerd.URL, SHA256: c.Containerd.SHA256})
	}
	for i, img := range c.Images {
		out.Artifacts = append(out.Artifacts, preflight.Artifact{Name: fmt.Sprintf("image-%d", i), URL: img.URL, SHA256: img.SHA256})
	}
	return out
}

// hostOpKinds maps the preflight engine's host operations to the wire's
// operation kinds.
var hostOpKinds = map[preflight.HostOp]api.OperationKind{
	preflight.HostOpArtifacts: api.OpCheckArtifacts,
	preflight.HostOpPeers:     api.OpProbePeers,
}

// PreflightOperationsToAPI writes a preflight run's host operations
// (preflight.HostOperations), by node, as the agents' operations.
func PreflightOperationsToAPI(ops map[string][]preflight.HostOperation) map[string][]api.Operation {
	return conv.Map(ops, func(ops []preflight.HostOperation) []api.Operation {
		return conv.Slice(ops, func(o preflight.HostOperation) api.Operation {
			out := api.Operation{ID: o.ID, Kind: hostOpKinds[o.Op]}
			switch o.Op {
			case preflight.HostOpArtifacts:
				out.CheckArtifacts = &api.CheckArtifacts{Artifacts: conv.Slice(o.Artifacts, func(a preflight.Artifact) api.Artifact {
					return api.Artifact{Name: a.Name, URL: a.URL, SHA256: a.SHA256}
				})}
			case preflight.HostOpPeers:
				out.ProbePeers = &api.ProbePeers{Addresses: slices.Clone(o.Addresses)}
			}
			return out
		})
	})
}

// PreflightHostResult reads an agent's report of a preflight host
// operation; the engine judges it (preflight.HostCheckFromResults).
func PreflightHostResult(r api.OperationResult) preflight.HostResult {
	out := preflight.HostResult{
		ID:         r.ID,
		Finished:   r.State == api.OpSucceeded || r.State == api.OpFailed,
		Succeeded:  r.State == api.OpSucceeded,
		FinishedAt: r.FinishedAt,
		Message:    r.Message,
		Details:    maps.Clone(r.Details),
	}
	// A kind the engine does not know stays one: the ID's suffix must not
	// stand in for it.
	out.Op = preflight.HostOp(r.Kind)
	for op, kind := range hostOpKinds {
		if r.Kind == kind {
			out.Op = op
		}
	}
	return out
}
