package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/moltproject/molt/preflight"
)

// PreflightReader is preflight's ClusterReader over a Client: it answers
// the API-server questions of a preflight run (nodes, /readyz, blocking
// budgets, protected pods) and turns kube's per-node answers into
// preflight's types. It lives here, at the edge, so that package preflight
// stays pure and free of client-go.
type PreflightReader struct {
	c *Client
}

var _ preflight.ClusterReader = (*PreflightReader)(nil)

// NewPreflightReader returns the ClusterReader over c.
func NewPreflightReader(c *Client) *PreflightReader {
	return &PreflightReader{c: c}
}

// Nodes reads each node; one that does not exist is left out of the map.
// It makes one GET per node.
func (r *PreflightReader) Nodes(ctx context.Context, nodes []string) (map[string]preflight.NodeInfo, error) {
	out := make(map[string]preflight.NodeInfo, len(nodes))
	for _, n := range nodes {
		st, err := r.c.NodeState(ctx, n)
		if errors.Is(err, ErrNodeNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[n] = preflight.NodeInfo{Ready: st.Ready, KubeletVersion: st.KubeletVersion}
	}
	return out, nil
}

// ControlPlane fetches /readyz?verbose and parses it with
// preflight.ParseReadyz.
func (r *PreflightReader) ControlPlane(ctx context.Context) (preflight.ControlPlaneHealth, error) {
	status, body, err := r.c.Readyz(ctx)
	if err != nil {
		return preflight.ControlPlaneHealth{}, fmt.Errorf("GET /readyz: %w", err)
	}
	return preflight.ParseReadyz(status, body), nil
}

// BlockingPDBs merges the per-node answers of Client.BlockingPDBs: one
// PDBInfo per budget, with every node and pod it covers, ordered by
// namespace and name.
func (r *PreflightReader) BlockingPDBs(ctx context.Context, nodes []string) ([]preflight.PDBInfo, error) {
	byKey := map[string]*preflight.PDBInfo{}
	for _, n := range nodes {
		refs, err := r.c.BlockingPDBs(ctx, n)
		if err != nil {
			return nil, err
		}
		for _, ref := range refs {
			key := ref.Namespace + "/" + ref.Name
			p := byKey[key]
			if p == nil {
				p = &preflight.PDBInfo{Namespace: ref.Namespace, Name: ref.Name}
				byKey[key] = p
			}
			p.Nodes = append(p.Nodes, n)
			p.Pods = append(p.Pods, ref.Pods...)
		}
	}
	out := make([]preflight.PDBInfo, 0, len(byKey))
	for _, p := range byKey {
		slices.Sort(p.Nodes)
		slices.Sort(p.Pods)
		p.Nodes, p.Pods = slices.Compact(p.Nodes), slices.Compact(p.Pods)
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// ProtectedPods collects the per-node answers of Client.ProtectedPods,
// ordered by node, then namespace and name.
func (r *PreflightReader) ProtectedPods(ctx context.Context, nodes []string, now time.Time) ([]preflight.ProtectedPod, error) {
	sorted := slices.Sorted(slices.Values(nodes))
	var out []preflight.ProtectedPod
	for _, n := range sorted {
		pods, err := r.c.ProtectedPods(ctx, n, now)
		if err != nil {
			return nil, err
		}
		for _, p := range pods {
			out = append(out, preflight.ProtectedPod{Namespace: p.Namespace, Name: p.Name, Node: n, EvictableAt: p.EvictableAt})
		}
	}
	if out == nil {
		out = []preflight.ProtectedPod{}
	}
	return out, nil
}

// DeprecatedAPIs reads the API server's apiserver_requested_deprecated_apis
// (Client.DeprecatedAPIs).
func (r *PreflightReader) DeprecatedAPIs(ctx context.Context) ([]preflight.DeprecatedAPI, error) {
	return r.c.DeprecatedAPIs(ctx)
}
