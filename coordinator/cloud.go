package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/phases"
)

// CloudConnector gives the cloud adapter a cluster's MIG pools are driven
// through (SPEC §7). The binary wires the adapters it was built with (gce,
// lab); tests give the in-memory one.
type CloudConnector interface {
	Provider(spec phases.CloudSpec) (cloud.Provider, error)
}

// ErrNoCloud is returned for MIG work on a cluster whose cloud adapter
// this member cannot reach (none configured, or not this provider).
var ErrNoCloud = errors.New("no cloud adapter for the cluster")

// Defaults of the cloud settings in Config.
const (
	DefaultInstanceTimeout    = 15 * time.Minute
	DefaultInstancePoll       = 2 * time.Second
	DefaultCloudRetryInterval = time.Minute
)

// cloudFor is the provider of a cluster's cloud spec.
func (c *Coordinator) cloudFor(spec *phases.CloudSpec) (cloud.Provider, error) {
	if spec == nil {
		return nil, fmt.Errorf("%w: the cluster names no cloud adapter", ErrNoCloud)
	}
	if c.cfg.Clouds == nil {
		return nil, fmt.Errorf("%w: this member has no cloud adapters configured (cluster wants %q)", ErrNoCloud, spec.Provider)
	}
	p, err := c.cfg.Clouds.Provider(*spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoCloud, spec.Provider, err)
	}
	return p, nil
}

// admitCloud checks a cluster's MIG pools against its cloud before the
// registration is proposed: the adapter exists here, every group exists,
// and a pool registered without nodes gets its groups' instances as nodes
// (a MIG pool's nodes are its instances; molt keeps them current).
func (c *Coordinator) admitCloud(ctx context.Context, spec *phases.ClusterSpec) error {
	var migs []int
	for i := range spec.Pools {
		if spec.Pools[i].Backing == phases.BackingMIG {
			migs = append(migs, i)
		}
	}
	if len(migs) == 0 || spec.Cloud == nil {
		return nil // Validate names what is missing
	}
	prov, err := c.cloudFor(spec.Cloud)
	if err != nil {
		return &RuleError{Rule: "cloud-provider", Detail: err.Error(), Err: ErrInvalid}
	}
	for _, i := range migs {
		p := &spec.Pools[i]
		fill := len(p.Nodes) == 0
		for _, g := range p.Groups {
			ref := cloud.GroupRef{Zone: g.Zone, Name: g.Name}
			if _, err := prov.GetGroup(ctx, ref); err != nil {
				if errors.Is(err, cloud.ErrNotFound) {
					return &RuleError{Rule: "cloud-group-not-found", Detail: fmt.Sprintf("pool %s: instance group %s does not exist in %s", p.Name, ref, spec.Cloud.Provider), Err: ErrInvalid}
				}
				if cloud.Retryable(err) {
					// Nothing answered (or not yet): the registration cannot
					// check its groups; say so rather than fail inside.
					return &RuleError{Rule: "cloud-unreachable", Detail: fmt.Sprintf("pool %s: the %s adapter could not be asked for group %s (registration checks every group; try again once it answers): %v", p.Name, spec.Cloud.Provider, ref, err), Err: ErrInvalid}
				}
				return fmt.Errorf("pool %s: group %s: %w", p.Name, ref, err)
			}
			if !fill {
				continue
			}
			insts, err := prov.ListInstances(ctx, ref)
			if err != nil {
				return fmt.Errorf("pool %s: group %s: %w", p.Name, ref, err)
			}
			for _, in := range insts {
				p.Nodes = append(p.Nodes, phases.Node{Name: in.Name, Zone: g.Zone})
			}
		}
	}
	return nil
}
