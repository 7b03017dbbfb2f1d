package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

// kubeOps is ClusterOps over a cluster's real API server (package kube).
type kubeOps struct {
	k   *kube.Client
	log *slog.Logger
}

// ConnectKube builds the ClusterOps of a cluster from its kubeconfig.
// cfg carries the drain settings (kube.DefaultConfig: 20-minute best-effort
// drains of bare-metal nodes, an hour for MIG surge nodes, grace capped at
// 1 hour, 7-day protection of safe-to-evict=false pods on automatic
// upgrades); settings past those caps are refused (kube.Config.Validate).
func ConnectKube(cluster string, kubeconfig []byte, cfg kube.Config, log *slog.Logger) (ClusterOps, error) {
	if log != nil {
		cfg.Logger = log.With("cluster", cluster)
	}
	k, err := kube.NewFromKubeconfig(cfg, kubeconfig)
	if err != nil {
		return nil, err
	}
	return &kubeOps{k: k, log: cfg.Logger}, nil
}

func (o *kubeOps) Cordon(ctx context.Context, node string) error {
	return unavailable(o.k.Cordon(ctx, node))
}
func (o *kubeOps) Uncordon(ctx context.Context, node string) error {
	return unavailable(o.k.Uncordon(ctx, node))
}

// unavailable marks an error of a call the API server did not answer, or
// answered that it is overloaded or unavailable (kube.Transient), with
// ErrAPIUnavailable: the coordinator repeats such calls for a while rather
// than fail the step (Coordinator.retry).
func unavailable(err error) error {
	if err != nil && kube.Transient(err) {
		return fmt.Errorf("%w: %w", ErrAPIUnavailable, err)
	}
	return err
}

func (o *kubeOps) Drain(ctx context.Context, node string, opts DrainOptions) (Drained, error) {
	kind := kube.DrainNode
	if opts.Surge {
		kind = kube.DrainSurge
	}
	res, err := o.k.Drain(ctx, node, kube.DrainOptions{Automatic: opts.Automatic, Kind: kind})
	if err != nil {
		return Drained{}, unavailable(err)
	}
	d := Drained{Left: leftPods(res.LeftBehind)}
	for _, w := range res.Workloads {
		d.Workloads = append(d.Workloads, phases.Workload{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name})
	}
	return d, nil
}

func (o *kubeOps) NodeReady(ctx context.Context, node, kubeletVersion string) error {
	st, err := o.k.NodeState(ctx, node)
	switch {
	case err != nil:
		return err
	case !st.Ready:
		return fmt.Errorf("node %s is not Ready", node)
	case st.KubeletVersion != kubeletVersion:
		return fmt.Errorf("node %s runs kubelet %s, want %s", node, st.KubeletVersion, kubeletVersion)
	}
	return nil
}

func (o *kubeOps) WorkloadsReady(ctx context.Context, ws []phases.Workload) error {
	refs := make([]kube.WorkloadRef, 0, len(ws))
	for _, w := range ws {
		refs = append(refs, kube.WorkloadRef{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name})
	}
	return o.k.WorkloadsReady(ctx, refs)
}

func (o *kubeOps) DeletePods(ctx context.Context, node string) ([]phases.LeftPod, error) {
	res, err := o.k.Drain(ctx, node, kube.DrainOptions{Delete: true, Timeout: phases.DeleteBlueGracePeriod + time.Minute})
	if err != nil {
		return nil, unavailable(err)
	}
	return leftPods(res.LeftBehind), nil
}

func (o *kubeOps) DeleteNode(ctx context.Context, node string) error {
	return unavailable(o.k.DeleteNode(ctx, node))
}

// FreezeBlueNode and ThawBlueNode pass over a Node that does not exist:
// the cluster autoscaler cannot copy a missing Node into a template, and a
// missing Node has nothing to take off.
func (o *kubeOps) FreezeBlueNode(ctx context.Context, node string) error {
	return unavailable(nodeGone(o.k.FreezeBlueNode(ctx, node)))
}
func (o *kubeOps) ThawBlueNode(ctx context.Context, node string) error {
	return unavailable(nodeGone(o.k.ThawBlueNode(ctx, node)))
}

func nodeGone(err error) error {
	if errors.Is(err, kube.ErrNodeNotFound) {
		return nil
	}
	return err
}

func leftPods(in []kube.LeftPod) []phases.LeftPod {
	left := make([]phases.LeftPod, 0, len(in))
	for _, l := range in {
		left = append(left, phases.LeftPod{Namespace: l.Namespace, Name: l.Name, Reason: l.Reason, EvictableAt: l.EvictableAt})
	}
	return left
}

func (o *kubeOps) WaitReady(ctx context.Context, node, kubeletVersion string) error {
	return o.k.WaitNodeReady(ctx, node, kubeletVersion)
}

func (o *kubeOps) WaitServing(ctx context.Context, node string) error {
	return o.k.WaitStaticPodsReady(ctx, node)
}

func (o *kubeOps) ProtectedUntil(ctx context.Context, node string, now time.Time) (ProtectedInfo, error) {
	pods, err := o.k.ProtectedPods(ctx, node, now)
	if err != nil {
		return ProtectedInfo{}, err
	}
	var info ProtectedInfo
	for _, p := range pods {
		info.Pods++
		if p.EvictableAt.After(info.Until) {
			info.Until = p.EvictableAt
		}
	}
	return info, nil
}

// ApplyAddons applies every add-on of the release with server-side apply
// (field manager "molt"), in the catalog's order, then waits until the
// DaemonSets and Deployments among them rolled out. A release without
// add-ons applies nothing.
func (o *kubeOps) ApplyAddons(ctx context.Context, v phases.Version, addons []api.AddonManifest) error {
	var refs []kube.ObjectRef
	for _, a := range addons {
		applied, err := o.k.Apply(ctx, []byte(a.YAML))
		if err != nil {
			return unavailable(fmt.Errorf("add-on %s of v%s: %w", a.Name, v, err))
		}
		refs = append(refs, applied...)
	}
	if err := o.k.WaitRollout(ctx, refs); err != nil {
		return fmt.Errorf("add-ons of v%s: %w", v, err)
	}
	if o.log != nil && len(addons) > 0 {
		o.log.Info("add-ons applied and rolled out", "version", v.String(), "objects", len(refs))
	}
	return nil
}

// Health passes when every node is Ready at the target kubelet version.
func (o *kubeOps) Health(ctx context.Context, v phases.Version, nodes []string) error {
	var errs []error
	for _, n := range nodes {
		errs = append(errs, o.NodeReady(ctx, n, v.KubeletVersion()))
	}
	return errors.Join(errs...)
}

// PreflightReader reads nodes, PDBs and protected pods through kube, and
// the API server's /readyz.
func (o *kubeOps) PreflightReader() preflight.ClusterReader {
	return kube.NewPreflightReader(o.k)
}
