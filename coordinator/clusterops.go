package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

// ClusterOps is what the leader does to a cluster through its API server.
// Every method is idempotent: after a leader change the new leader repeats
// whatever work was in flight, and a repeat must be harmless.
type ClusterOps interface {
	Cordon(ctx context.Context, node string) error
	// Drain evicts best effort and returns the pods it left behind and
	// the controllers of those it evicted; giving up after the drain
	// timeout of the node's kind (opts.Surge) is not an error (SPEC §6,
	// §7).
	Drain(ctx context.Context, node string, opts DrainOptions) (Drained, error)
	WaitReady(ctx context.Context, node, kubeletVersion string) error
	// WaitServing waits until the node serves what it runs: every static
	// pod on it (its mirror pods) Ready. An LB pool's node is done only
	// then (Coordinator.waitReady); ctx's deadline bounds the wait.
	WaitServing(ctx context.Context, node string) error
	// NodeReady returns nil when the node is Ready with its kubelet at
	// kubeletVersion, else an error saying what it is (one read, no wait).
	NodeReady(ctx context.Context, node, kubeletVersion string) error
	// WorkloadsReady returns nil when every controller in ws has its
	// desired replicas ready (one read each, no wait), else an error
	// naming those short with their counts.
	WorkloadsReady(ctx context.Context, ws []phases.Workload) error
	Uncordon(ctx context.Context, node string) error
	// ProtectedUntil returns when the last pod protected from eviction on
	// the node frees up (zero: none), judged at now (the leader's clock).
	ProtectedUntil(ctx context.Context, node string, now time.Time) (ProtectedInfo, error)
	// ApplyAddons applies the add-on manifests of the release at version
	// (the catalog entry's Components.Addons) and returns nil only once
	// they rolled out. ctx's deadline bounds the wait; an unfinished
	// rollout's error names the objects and their counts.
	ApplyAddons(ctx context.Context, version phases.Version, addons []api.AddonManifest) error
	// Health runs the final cluster checks on the named nodes: nil when
	// all pass.
	Health(ctx context.Context, version phases.Version, nodes []string) error
	// PreflightReader reads what preflight checks need from the cluster.
	PreflightReader() preflight.ClusterReader
	// DeletePods deletes the node's pods (not evicted: PDBs do not hold
	// them; grace capped at an hour) and waits for them to go, as
	// blue/green deletes the blue pool (SPEC §7); it returns the pods
	// still there at the cap.
	DeletePods(ctx context.Context, node string) ([]phases.LeftPod, error)
	// DeleteNode deletes the Node object of a deleted instance; a Node
	// already gone is not an error.
	DeleteNode(ctx context.Context, node string) error
	// FreezeBlueNode keeps the Kubernetes cluster autoscaler from scaling
	// a blue pool down or up through this node (its scale-down-disabled
	// annotation, molt's NoSchedule taint: kube.TaintBluePool);
	// ThawBlueNode undoes it. A Node that does not exist is not an error.
	FreezeBlueNode(ctx context.Context, node string) error
	ThawBlueNode(ctx context.Context, node string) error
}

// DrainOptions vary one node's drain.
type DrainOptions struct {
	// Automatic: the drain of an automatic upgrade, which alone honours
	// safe-to-evict=false protection (SPEC §8).
	Automatic bool
	// Surge: the node is a MIG surge pool's (replaced, or recreated in
	// place). Its drain honours PodDisruptionBudgets and grace periods for
	// up to an hour (--surge-drain-timeout), as GKE's surge upgrades; any
	// other node's for up to 20 minutes (--drain-timeout, GKE on Bare
	// Metal). docs/drain.md, docs/mig.md.
	Surge bool
}

// drainOptions is how the node step of pool drains: the bound of its
// kind of pool, and whether the upgrade is automatic.
func drainOptions(u *phases.Upgrade, pool string) DrainOptions {
	o := DrainOptions{Automatic: u.Options.Automatic}
	if p, ok := u.Pool(pool); ok {
		o.Surge = p.Backing == phases.BackingMIG && p.Strategy == phases.StrategySurge
	}
	return o
}

// Drained is what a best-effort drain did: the pods it left behind, and
// the controllers of the pods it evicted (the node's health gates wait for
// them to be back, SPEC §16).
type Drained struct {
	Left      []phases.LeftPod
	Workloads []phases.Workload
}

// ProtectedInfo describes pods on a node protected from eviction.
type ProtectedInfo struct {
	Until time.Time
	Pods  int
}

// Connector gives the ClusterOps of a registered cluster.
type Connector interface {
	Connect(cluster string, kubeconfig []byte) (ClusterOps, error)
}

// ErrNoClusterAccess is returned for work on a cluster the coordinator has
// no way to reach (no kubeconfig, or no connector configured).
var ErrNoClusterAccess = errors.New("no access to the cluster's API server")

// clusterOps connects to a cluster with its kubeconfig as stored
// (statemachine.ClusterRecord.StoredKubeconfig), opening it when sealed,
// and reuses the connection while the stored kubeconfig is unchanged.
func (c *Coordinator) clusterOps(cluster, stored string) (ClusterOps, error) {
	if c.cfg.Connector == nil || stored == "" {
		return nil, fmt.Errorf("cluster %s: %w", cluster, ErrNoClusterAccess)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if co, ok := c.opsCache[cluster]; ok && co.kubeconfig == stored {
		return co.ops, nil
	}
	kubeconfig, err := c.openKubeconfig(cluster, stored)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoClusterAccess, err)
	}
	ops, err := c.cfg.Connector.Connect(cluster, kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w: %w", cluster, ErrNoClusterAccess, err)
	}
	c.opsCache[cluster] = cachedOps{kubeconfig: stored, ops: ops}
	return ops, nil
}

// cachedOps is a cluster's connection and the stored (sealed) kubeconfig
// it was made with.
type cachedOps struct {
	kubeconfig string
	ops        ClusterOps
}
