package preflight

import (
	"context"
	"errors"
	"time"
)

// ErrNoClusterAccess is recorded for every API-server source when the
// coordinator has no ClusterReader for a cluster (no kubeconfig).
var ErrNoClusterAccess = errors.New("no access to the cluster's API server is configured")

// ClusterReader is what preflight reads from a cluster's API server. It is
// implemented at the edge, by kube.PreflightReader, so that this package
// does no I/O and imports no Kubernetes client.
type ClusterReader interface {
	// Nodes returns the named nodes that exist; an absent name does not
	// exist in the API server.
	Nodes(ctx context.Context, nodes []string) (map[string]NodeInfo, error)
	// ControlPlane returns the API server's /readyz health.
	ControlPlane(ctx context.Context) (ControlPlaneHealth, error)
	// BlockingPDBs returns the budgets that would refuse an eviction of a
	// pod on one of nodes right now.
	BlockingPDBs(ctx context.Context, nodes []string) ([]PDBInfo, error)
	// ProtectedPods returns the pods on nodes that an automatic drain at
	// now would leave alone.
	ProtectedPods(ctx context.Context, nodes []string, now time.Time) ([]ProtectedPod, error)
	// DeprecatedAPIs returns the deprecated APIs the API server has
	// served since it started (apiserver_requested_deprecated_apis).
	DeprecatedAPIs(ctx context.Context) ([]DeprecatedAPI, error)
}

// GatherCluster reads every API-server source of in through r, for the
// nodes of in.Cluster at in.Now, and records each outcome with
// SetGathered. It returns nothing: a source that fails makes the checks
// that need it fail with the reason, and the other checks still run. A nil
// r records ErrNoClusterAccess for every source.
func GatherCluster(ctx context.Context, r ClusterReader, in *Input) {
	if r == nil {
		for _, s := range []Source{SourceNodes, SourceControlPlane, SourcePDBs, SourceProtectedPods, SourceDeprecatedAPIs} {
			in.SetGathered(s, ErrNoClusterAccess)
		}
		return
	}
	nodes := NodeNames(in.Cluster)
	var err error
	in.Nodes, err = r.Nodes(ctx, nodes)
	in.SetGathered(SourceNodes, err)
	in.ControlPlane, err = r.ControlPlane(ctx)
	in.SetGathered(SourceControlPlane, err)
	in.BlockingPDBs, err = r.BlockingPDBs(ctx, nodes)
	in.SetGathered(SourcePDBs, err)
	in.ProtectedPods, err = r.ProtectedPods(ctx, nodes, in.Now)
	in.SetGathered(SourceProtectedPods, err)
	in.DeprecatedAPIs, err = r.DeprecatedAPIs(ctx)
	in.SetGathered(SourceDeprecatedAPIs, err)
}
