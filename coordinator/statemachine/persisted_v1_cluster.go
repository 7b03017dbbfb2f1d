package statemachine

import (
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/phases"
)

// Persisted form of a cluster's shape (see persisted.go: append-only).

type clusterSpecV1 struct {
	Name         string   `json:"name"`
	Kind         string   `json:"kind"`
	AdminCluster string   `json:"adminCluster,omitempty"`
	Channel      string   `json:"channel,omitempty"`
	Version      string   `json:"version"`
	Pools        []poolV1 `json:"pools"`
}

type poolV1 struct {
	Name     string            `json:"name"`
	Role     string            `json:"role"`
	Backing  string            `json:"backing,omitempty"`
	Settings upgradeSettingsV1 `json:"upgradeSettings,omitzero"`
	Nodes    []nodeV1          `json:"nodes"`
}

type upgradeSettingsV1 struct {
	ConcurrentNodes       int    `json:"concurrentNodes,omitempty"`
	MinimumAvailableNodes int    `json:"minimumAvailableNodes,omitempty"`
	Strategy              string `json:"strategy,omitempty"`
	MaxSurge              *int   `json:"maxSurge,omitempty"`
	MaxUnavailable        *int   `json:"maxUnavailable,omitempty"`
}

type nodeV1 struct {
	Name    string `json:"name"`
	Address string `json:"address,omitempty"`
	Zone    string `json:"zone,omitempty"`
}

func clusterSpecToV1(s phases.ClusterSpec) clusterSpecV1 {
	return clusterSpecV1{Name: s.Name, Kind: string(s.Kind), AdminCluster: s.AdminCluster, Channel: s.Channel,
		Version: s.Version.String(), Pools: conv.Slice(s.Pools, poolToV1)}
}

func (d *v1Decoder) clusterSpec(s clusterSpecV1) phases.ClusterSpec {
	return phases.ClusterSpec{Name: s.Name, Kind: phases.ClusterKind(s.Kind), AdminCluster: s.AdminCluster, Channel: s.Channel,
		Version: d.version(s.Version), Pools: conv.Slice(s.Pools, poolFromV1)}
}

func poolToV1(p phases.Pool) poolV1 {
	s := p.Settings
	return poolV1{Name: p.Name, Role: string(p.Role), Backing: string(p.Backing),
		Settings: upgradeSettingsV1{ConcurrentNodes: s.ConcurrentNodes, MinimumAvailableNodes: s.MinimumAvailableNodes, Strategy: s.Strategy,
			MaxSurge: conv.Ptr(s.MaxSurge, conv.Same[int]), MaxUnavailable: conv.Ptr(s.MaxUnavailable, conv.Same[int])},
		Nodes: conv.Slice(p.Nodes, func(n phases.Node) nodeV1 { return nodeV1{Name: n.Name, Address: n.Address, Zone: n.Zone} })}
}

func poolFromV1(p poolV1) phases.Pool {
	s := p.Settings
	return phases.Pool{Name: p.Name, Role: phases.Role(p.Role), Backing: phases.Backing(p.Backing),
		Settings: phases.UpgradeSettings{ConcurrentNodes: s.ConcurrentNodes, MinimumAvailableNodes: s.MinimumAvailableNodes, Strategy: s.Strategy,
			MaxSurge: conv.Ptr(s.MaxSurge, conv.Same[int]), MaxUnavailable: conv.Ptr(s.MaxUnavailable, conv.Same[int])},
		Nodes: conv.Slice(p.Nodes, func(n nodeV1) phases.Node { return phases.Node{Name: n.Name, Address: n.Address, Zone: n.Zone} })}
}
