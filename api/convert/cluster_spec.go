package convert

import (
	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/phases"
)

// ClusterSpecToAPI renders a cluster's shape for the wire. The result has
// no Kubeconfig: the engine does not hold it, and the API never returns it.
func ClusterSpecToAPI(s phases.ClusterSpec) api.ClusterSpec {
	return api.ClusterSpec{
		Name: s.Name, Kind: api.ClusterKind(s.Kind), AdminCluster: s.AdminCluster, Channel: s.Channel,
		Version: s.Version.String(), Pools: conv.Slice(s.Pools, poolToAPI),
	}
}

// ClusterSpecFromAPI reads a cluster's shape from the wire; the Kubeconfig
// is not part of it (the caller keeps it). It fails when the version is
// not "1.N.X"; the shape itself is judged by phases.ClusterSpec.Validate.
func ClusterSpecFromAPI(s api.ClusterSpec) (phases.ClusterSpec, error) {
	var d fromAPI
	out := phases.ClusterSpec{
		Name: s.Name, Kind: phases.ClusterKind(s.Kind), AdminCluster: s.AdminCluster, Channel: s.Channel,
		Version: d.version("version", s.Version), Pools: conv.Slice(s.Pools, poolFromAPI),
	}
	return out, d.err
}

func poolToAPI(p phases.Pool) api.Pool {
	return api.Pool{Name: p.Name, Role: api.Role(p.Role), Backing: api.Backing(p.Backing),
		Settings: api.UpgradeSettings(settings(p.Settings)), Nodes: conv.Slice(p.Nodes, nodeToAPI)}
}

func poolFromAPI(p api.Pool) phases.Pool {
	return phases.Pool{Name: p.Name, Role: phases.Role(p.Role), Backing: phases.Backing(p.Backing),
		Settings: settings(phases.UpgradeSettings(p.Settings)), Nodes: conv.Slice(p.Nodes, nodeFromAPI)}
}

// settings copies upgrade settings without sharing their pointers. The
// wire and engine types have the same fields, so Go converts one into the
// other directly; the day they differ, that conversion stops compiling.
func settings(s phases.UpgradeSettings) phases.UpgradeSettings {
	s.MaxSurge = conv.Ptr(s.MaxSurge, conv.Same[int])
	s.MaxUnavailable = conv.Ptr(s.MaxUnavailable, conv.Same[int])
	return s
}

func nodeToAPI(n phases.Node) api.Node {
	return api.Node{Name: n.Name, Address: n.Address, Zone: n.Zone}
}

func nodeFromAPI(n api.Node) phases.Node {
	return phases.Node{Name: n.Name, Address: n.Address, Zone: n.Zone}
}
