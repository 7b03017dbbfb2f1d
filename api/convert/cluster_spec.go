package convert

import (
	"maps"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/phases"
)

// ClusterSpecToAPI renders a cluster's shape for the wire. The result has
// no Kubeconfig and no MaintenancePolicy: the engine's spec holds neither,
// and the API returns neither here.
func ClusterSpecToAPI(s phases.ClusterSpec) api.ClusterSpec {
	return api.ClusterSpec{
		Name: s.Name, Kind: api.ClusterKind(s.Kind), AdminCluster: s.AdminCluster, Channel: s.Channel,
		Version: s.Version.String(), Pools: conv.Slice(s.Pools, poolToAPI),
		Cloud:       conv.Ptr(s.Cloud, func(c phases.CloudSpec) api.CloudSpec { return api.CloudSpec(c) }),
		HealthGates: conv.Slice(s.HealthGates, HealthGateToAPI),
		Labels:      maps.Clone(s.Labels),
		EtcdBackup:  s.EtcdBackup,
	}
}

// HealthGateToAPI renders a health gate for the wire ("for" in whole
// seconds, empty when 0).
func HealthGateToAPI(g phases.HealthGate) api.HealthGate {
	out := api.HealthGate{Name: g.Name, Expr: g.Expr, Prometheus: g.Prometheus}
	if g.For != 0 {
		out.For = DurationToAPI(g.For)
	}
	return out
}

func healthGateFromAPI(d *fromAPI, where string, g api.HealthGate) phases.HealthGate {
	out := phases.HealthGate{Name: g.Name, Expr: g.Expr, Prometheus: g.Prometheus}
	if g.For != "" {
		out.For = d.duration(where+": health gate "+g.Name+": for", g.For)
	}
	return out
}

// ClusterSpecFromAPI reads a cluster's shape from the wire; the Kubeconfig
// and the MaintenancePolicy are not part of it (the caller keeps them,
// MaintenancePolicyFromAPI). It fails when the version is
// not "1.N.X"; the shape itself is judged by phases.ClusterSpec.Validate.
func ClusterSpecFromAPI(s api.ClusterSpec) (phases.ClusterSpec, error) {
	var d fromAPI
	out := phases.ClusterSpec{
		Name: s.Name, Kind: phases.ClusterKind(s.Kind), AdminCluster: s.AdminCluster, Channel: s.Channel,
		Version: d.version("version", s.Version),
		Pools:   conv.Slice(s.Pools, func(p api.Pool) phases.Pool { return poolFromAPI(&d, p) }),
		Cloud:   conv.Ptr(s.Cloud, func(c api.CloudSpec) phases.CloudSpec { return phases.CloudSpec(c) }),
		HealthGates: conv.Slice(s.HealthGates, func(g api.HealthGate) phases.HealthGate {
			return healthGateFromAPI(&d, "cluster "+s.Name, g)
		}),
		Labels:     maps.Clone(s.Labels),
		EtcdBackup: s.EtcdBackup,
	}
	return out, d.err
}

func poolToAPI(p phases.Pool) api.Pool {
	return api.Pool{Name: p.Name, Role: api.Role(p.Role), Backing: api.Backing(p.Backing),
		Settings: settingsToAPI(p.Settings), Nodes: conv.Slice(p.Nodes, nodeToAPI),
		Groups: conv.Slice(p.Groups, groupToAPI), Spot: p.Spot,
		Autoscaling: conv.Ptr(p.Autoscaling, func(a phases.Autoscaling) api.Autoscaling { return api.Autoscaling(a) })}
}

func poolFromAPI(d *fromAPI, p api.Pool) phases.Pool {
	return phases.Pool{Name: p.Name, Role: phases.Role(p.Role), Backing: phases.Backing(p.Backing),
		Settings: settingsFromAPI(d, p.Name, p.Settings), Nodes: conv.Slice(p.Nodes, nodeFromAPI),
		Groups: conv.Slice(p.Groups, groupFromAPI), Spot: p.Spot,
		Autoscaling: conv.Ptr(p.Autoscaling, func(a api.Autoscaling) phases.Autoscaling { return phases.Autoscaling(a) })}
}

func groupToAPI(g phases.InstanceGroup) api.InstanceGroup   { return api.InstanceGroup(g) }
func groupFromAPI(g api.InstanceGroup) phases.InstanceGroup { return phases.InstanceGroup(g) }

func settingsToAPI(s phases.UpgradeSettings) api.UpgradeSettings {
	return api.UpgradeSettings{ConcurrentNodes: s.ConcurrentNodes, MinimumAvailableNodes: s.MinimumAvailableNodes, Strategy: s.Strategy,
		MaxSurge: conv.Ptr(s.MaxSurge, conv.Same[int]), MaxUnavailable: conv.Ptr(s.MaxUnavailable, conv.Same[int]),
		BlueGreenSettings: conv.Ptr(s.BlueGreen, func(b phases.BlueGreenSettings) api.BlueGreenSettings {
			out := api.BlueGreenSettings{}
			if b.NodePoolSoak != nil {
				out.NodePoolSoakDuration = DurationToAPI(*b.NodePoolSoak)
			}
			if b.BatchNodeCount != nil || b.BatchPercentage != nil || b.BatchSoak != 0 {
				out.StandardRolloutPolicy = &api.StandardRolloutPolicy{BatchNodeCount: conv.Ptr(b.BatchNodeCount, conv.Same[int]),
					BatchPercentage: conv.Ptr(b.BatchPercentage, conv.Same[float64])}
				if b.BatchSoak != 0 {
					out.StandardRolloutPolicy.BatchSoakDuration = DurationToAPI(b.BatchSoak)
				}
			}
			return out
		}),
		MaxFailedNodes: conv.Ptr(s.MaxFailedNodes, conv.Same[int]), Rollback: s.Rollback, HealthGates: conv.Slice(s.HealthGates, HealthGateToAPI)}
}

func settingsFromAPI(d *fromAPI, pool string, s api.UpgradeSettings) phases.UpgradeSettings {
	return phases.UpgradeSettings{ConcurrentNodes: s.ConcurrentNodes, MinimumAvailableNodes: s.MinimumAvailableNodes, Strategy: s.Strategy,
		MaxSurge: conv.Ptr(s.MaxSurge, conv.Same[int]), MaxUnavailable: conv.Ptr(s.MaxUnavailable, conv.Same[int]),
		BlueGreen: conv.Ptr(s.BlueGreenSettings, func(b api.BlueGreenSettings) phases.BlueGreenSettings {
			var out phases.BlueGreenSettings
			if b.NodePoolSoakDuration != "" {
				soak := d.duration("pool "+pool+": nodePoolSoakDuration", b.NodePoolSoakDuration)
				out.NodePoolSoak = &soak
			}
			if r := b.StandardRolloutPolicy; r != nil {
				out.BatchNodeCount = conv.Ptr(r.BatchNodeCount, conv.Same[int])
				out.BatchPercentage = conv.Ptr(r.BatchPercentage, conv.Same[float64])
				if r.BatchSoakDuration != "" {
					out.BatchSoak = d.duration("pool "+pool+": batchSoakDuration", r.BatchSoakDuration)
				}
			}
			return out
		}),
		MaxFailedNodes: conv.Ptr(s.MaxFailedNodes, conv.Same[int]), Rollback: s.Rollback,
		HealthGates: conv.Slice(s.HealthGates, func(g api.HealthGate) phases.HealthGate { return healthGateFromAPI(d, "pool "+pool, g) })}
}

func nodeToAPI(n phases.Node) api.Node {
	return api.Node{Name: n.Name, Address: n.Address, Zone: n.Zone}
}

func nodeFromAPI(n api.Node) phases.Node {
	return phases.Node{Name: n.Name, Address: n.Address, Zone: n.Zone}
}
