package preflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/moltproject/molt/kube"
)

// ErrNoReadyz is returned by KubeReader.ControlPlane when it was built
// without a Readyz source.
var ErrNoReadyz = errors.New("no /readyz source configured")

// KubeNodes is the part of *kube.Client that KubeReader uses.
type KubeNodes interface {
	NodeState(ctx context.Context, node string) (kube.NodeState, error)
	BlockingPDBs(ctx context.Context, node string) ([]kube.PDBRef, error)
	ProtectedPods(ctx context.Context, node string, now time.Time) ([]kube.LeftPod, error)
}

// Readyz fetches GET /readyz?verbose from the API server. It returns the
// HTTP status and body; err only when no answer came at all. Package kube
// has no such call yet (see docs/preflight.md); the coordinator passes a
// ReadyzFunc until it does.
type Readyz interface {
	Readyz(ctx context.Context) (status int, body string, err error)
}

// ReadyzFunc adapts a function to Readyz.
type ReadyzFunc func(ctx context.Context) (int, string, error)

// Readyz calls f.
func (f ReadyzFunc) Readyz(ctx context.Context) (int, string, error) { return f(ctx) }

// KubeReader is the ClusterReader over package kube.
type KubeReader struct {
	kube   KubeNodes
	readyz Readyz
}

var (
	_ ClusterReader = (*KubeReader)(nil)
	_ KubeNodes     = (*kube.Client)(nil)
)

// NewKubeReader returns a ClusterReader over c (usually a *kube.Client)
// and readyz (nil makes ControlPlane fail with ErrNoReadyz).
func NewKubeReader(c KubeNodes, readyz Readyz) *KubeReader {
	return &KubeReader{kube: c, readyz: readyz}
}

// Nodes reads each node; one that does not exist is left out of the map.
// kube reads nodes one at a time, so this makes one GET per node.
func (r *KubeReader) Nodes(ctx context.Context, nodes []string) (map[string]NodeInfo, error) {
	out := make(map[string]NodeInfo, len(nodes))
	for _, n := range nodes {
		st, err := r.kube.NodeState(ctx, n)
		if errors.Is(err, kube.ErrNodeNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[n] = NodeInfo{Ready: st.Ready, KubeletVersion: st.KubeletVersion}
	}
	return out, nil
}

// ControlPlane fetches and parses /readyz?verbose.
func (r *KubeReader) ControlPlane(ctx context.Context) (ControlPlaneHealth, error) {
	if r.readyz == nil {
		return ControlPlaneHealth{}, ErrNoReadyz
	}
	status, body, err := r.readyz.Readyz(ctx)
	if err != nil {
		return ControlPlaneHealth{}, fmt.Errorf("GET /readyz: %w", err)
	}
	return ParseReadyz(status, body), nil
}

// BlockingPDBs merges kube's per-node answers: one PDBInfo per budget,
// with every node and pod it covers, ordered by namespace and name.
func (r *KubeReader) BlockingPDBs(ctx context.Context, nodes []string) ([]PDBInfo, error) {
	byKey := map[string]*PDBInfo{}
	for _, n := range nodes {
		refs, err := r.kube.BlockingPDBs(ctx, n)
		if err != nil {
			return nil, err
		}
		for _, ref := range refs {
			key := ref.Namespace + "/" + ref.Name
			p := byKey[key]
			if p == nil {
				p = &PDBInfo{Namespace: ref.Namespace, Name: ref.Name}
				byKey[key] = p
			}
			p.Nodes = append(p.Nodes, n)
			p.Pods = append(p.Pods, ref.Pods...)
		}
	}
	out := make([]PDBInfo, 0, len(byKey))
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

// ProtectedPods collects kube's per-node answers, ordered by node, then
// namespace and name.
func (r *KubeReader) ProtectedPods(ctx context.Context, nodes []string, now time.Time) ([]ProtectedPod, error) {
	sorted := slices.Sorted(slices.Values(nodes))
	var out []ProtectedPod
	for _, n := range sorted {
		pods, err := r.kube.ProtectedPods(ctx, n, now)
		if err != nil {
			return nil, err
		}
		for _, p := range pods {
			out = append(out, ProtectedPod{Namespace: p.Namespace, Name: p.Name, Node: n, EvictableAt: p.EvictableAt})
		}
	}
	if out == nil {
		out = []ProtectedPod{}
	}
	return out, nil
}
