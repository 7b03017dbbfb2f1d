package coordinator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

// checkObserved applies the version rules to what the cluster's agents
// report, beside molt's record (statemachine.CheckUpgrade): the upgrade
// from the lowest observed kubelet, and the Kubernetes version-skew
// policy of every kubelet against the target's API server. A cluster
// recorded at 1.34 whose nodes still run 1.33 refuses 1.35 as the
// skipped minor it is. It runs before the command is proposed, never in
// the apply: entries applied under the old rules replay the same.
func checkObserved(r *statemachine.ClusterRecord, to phases.Version) error {
	kubelets := statemachine.ObservedKubelets(r)
	low := statemachine.ObservedVersion(r)
	if !low.IsZero() && low != r.StatusVersion {
		if err := phases.CheckUpgrade(low, to); err != nil && phases.RuleOf(err) != phases.RuleSame {
			return err
		}
	}
	return phases.CheckKubeletsSkew(to, kubelets)
}

// registrationObserved reads the kubelet version of every node of spec
// from the API server of the kubeconfig given, for the registration to
// compare with the stated version. ok is false when it could not be
// read (no connector, no kubeconfig, an error): registration then takes
// the stated version as a claim that the agents' reports confirm or show
// as drift.
func (c *Coordinator) registrationObserved(ctx context.Context, spec phases.ClusterSpec, kubeconfig string) (map[string]phases.Version, bool) {
	if c.cfg.Connector == nil || kubeconfig == "" {
		return nil, false
	}
	ops, err := c.cfg.Connector.Connect(spec.Name, []byte(kubeconfig))
	if err != nil {
		c.log.Info("registration: cluster not reachable, stated version taken as a claim", "cluster", spec.Name, "err", err)
		return nil, false
	}
	rctx, cancel := context.WithTimeout(ctx, registrationReadTimeout)
	defer cancel()
	nodes, err := ops.PreflightReader().Nodes(rctx, preflight.NodeNames(spec))
	if err != nil {
		c.log.Info("registration: nodes not read, stated version taken as a claim", "cluster", spec.Name, "err", err)
		return nil, false
	}
	out := map[string]phases.Version{}
	for n, info := range nodes {
		if v, ok := phases.ParseKubelet(info.KubeletVersion); ok {
			out[n] = v
		}
	}
	return out, true
}

// registrationReadTimeout bounds the registration's read of the Nodes:
// an API server that does not answer makes the stated version a claim,
// not a registration that hangs.
const registrationReadTimeout = 10 * time.Second

// checkRegistration compares a new cluster's stated version with what its
// nodes report: the Node objects read through the kubeconfig given (its
// agents cannot have registered before the cluster). A mismatch is
// refused (phases.RuleObservedVersion, every node's version in the
// detail), or, with adopt, spec takes the lowest observed version. Nodes
// that cannot be read leave the stated version a claim: the agents'
// first reports confirm it or show the nodes as drift.
func (c *Coordinator) checkRegistration(ctx context.Context, spec *phases.ClusterSpec, kubeconfig string, adopt bool) error {
	observed, _ := c.registrationObserved(ctx, *spec, kubeconfig)
	err := phases.CheckStatedVersion(spec.Version, observed)
	if err == nil {
		return nil
	}
	if !adopt {
		return &RuleError{Rule: phases.RuleObservedVersion, Detail: err.(*phases.RuleError).Detail, Err: ErrInvalid}
	}
	var vs []phases.Version
	for _, n := range slices.Sorted(maps.Keys(observed)) {
		vs = append(vs, observed[n])
	}
	adopted := phases.Lowest(vs)
	noteAudit(ctx, func(r *AuditRecord) {
		r.Detail = fmt.Sprintf("adopted the observed version %s (stated %s)", adopted, spec.Version)
	})
	spec.Version = adopted
	return nil
}

// observedStatus derives status fields from the agents' reports: the
// lowest kubelet and containerd version observed, the nodes at each, and
// when the answering member last heard it (its beats; else when the
// report last changed in the replicated state).
func observedStatus(r *statemachine.ClusterRecord, live *liveness) *api.ObservedVersions {
	kubelet := observedComponent{less: kubeletLess}
	containerd := observedComponent{less: containerdLess}
	for node, a := range r.Agents {
		if !a.Registered {
			continue
		}
		seen := a.ChangedAt
		if t, ok := live.lastSeen(nodeKey(r.Spec.Name, node)); ok && t.After(seen) {
			seen = t
		}
		if v, ok := phases.ParseKubelet(a.Kubelet); ok {
			kubelet.add(v.String(), seen)
		}
		if a.Containerd != "" {
			containerd.add(a.Containerd, seen)
		}
	}
	if kubelet.out == nil && containerd.out == nil {
		return nil
	}
	return &api.ObservedVersions{Kubelet: kubelet.out, Containerd: containerd.out}
}

// observedComponent gathers one component's reports into its status;
// less orders its versions.
type observedComponent struct {
	out  *api.ObservedComponent
	less func(a, b string) bool
}

// add counts one node's report of version v, heard at seen.
func (o *observedComponent) add(v string, seen time.Time) {
	if o.out == nil {
		o.out = &api.ObservedComponent{Version: v, Nodes: map[string]int{}, LastSeen: seen}
	}
	o.out.Nodes[v]++
	switch {
	case o.less(v, o.out.Version):
		o.out.Version, o.out.LastSeen = v, seen
	case v == o.out.Version && seen.After(o.out.LastSeen):
		o.out.LastSeen = seen
	}
}

func kubeletLess(a, b string) bool {
	return phases.MustParseVersion(a).Less(phases.MustParseVersion(b))
}

// containerdLess orders containerd versions as the text sorts: the field
// is shown, no rule reads it.
func containerdLess(a, b string) bool { return a < b }
