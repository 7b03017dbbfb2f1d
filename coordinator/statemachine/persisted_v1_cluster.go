package statemachine

import (
	"maps"
	"time"

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
	// Added with MIG pools; absent before.
	Cloud *cloudSpecV1 `json:"cloud,omitempty"`
	// Added with health gates; absent before.
	HealthGates []healthGateV1 `json:"healthGates,omitempty"`
	// Added with rollout sequences (0.2.0); absent before.
	Labels map[string]string `json:"labels,omitempty"`
	// Added with the backup step (0.2.0, SinceBackups); absent before.
	EtcdBackup string `json:"etcdBackup,omitempty"`
}

// healthGateV1 is a PromQL health gate; For is nanoseconds.
type healthGateV1 struct {
	Name       string        `json:"name"`
	Expr       string        `json:"expr"`
	For        time.Duration `json:"for,omitempty"`
	Prometheus string        `json:"prometheus"`
}

type cloudSpecV1 struct {
	Provider string `json:"provider"`
	Project  string `json:"project,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
}

type instanceGroupV1 struct {
	Zone string `json:"zone"`
	Name string `json:"name"`
}

type autoscalingV1 struct {
	MinNodes int `json:"minNodes"`
	MaxNodes int `json:"maxNodes"`
}

// blueGreenSettingsV1 are a pool's blue/green settings; durations are
// nanoseconds.
type blueGreenSettingsV1 struct {
	BatchNodeCount  *int           `json:"batchNodeCount,omitempty"`
	BatchPercentage *float64       `json:"batchPercentage,omitempty"`
	BatchSoak       time.Duration  `json:"batchSoak,omitempty"`
	NodePoolSoak    *time.Duration `json:"nodePoolSoak,omitempty"`
}

type poolV1 struct {
	Name     string            `json:"name"`
	Role     string            `json:"role"`
	Backing  string            `json:"backing,omitempty"`
	Settings upgradeSettingsV1 `json:"upgradeSettings,omitzero"`
	Nodes    []nodeV1          `json:"nodes"`
	// Added with MIG pools; absent before.
	Groups      []instanceGroupV1 `json:"groups,omitempty"`
	Spot        bool              `json:"spot,omitempty"`
	Autoscaling *autoscalingV1    `json:"autoscaling,omitempty"`
}

type upgradeSettingsV1 struct {
	ConcurrentNodes       int    `json:"concurrentNodes,omitempty"`
	MinimumAvailableNodes int    `json:"minimumAvailableNodes,omitempty"`
	Strategy              string `json:"strategy,omitempty"`
	MaxSurge              *int   `json:"maxSurge,omitempty"`
	MaxUnavailable        *int   `json:"maxUnavailable,omitempty"`
	// Added with MIG strategies; absent before.
	BlueGreen *blueGreenSettingsV1 `json:"blueGreen,omitempty"`
	// Added with failure budgets and health gates; absent before.
	MaxFailedNodes *int           `json:"maxFailedNodes,omitempty"`
	Rollback       string         `json:"rollback,omitempty"`
	HealthGates    []healthGateV1 `json:"healthGates,omitempty"`
}

type nodeV1 struct {
	Name    string `json:"name"`
	Address string `json:"address,omitempty"`
	Zone    string `json:"zone,omitempty"`
}

func clusterSpecToV1(s phases.ClusterSpec) clusterSpecV1 {
	return clusterSpecV1{Name: s.Name, Kind: string(s.Kind), AdminCluster: s.AdminCluster, Channel: s.Channel,
		Version: s.Version.String(), Pools: conv.Slice(s.Pools, poolToV1),
		Cloud:       conv.Ptr(s.Cloud, func(c phases.CloudSpec) cloudSpecV1 { return cloudSpecV1(c) }),
		HealthGates: conv.Slice(s.HealthGates, healthGateToV1), Labels: maps.Clone(s.Labels), EtcdBackup: s.EtcdBackup}
}

func healthGateToV1(g phases.HealthGate) healthGateV1   { return healthGateV1(g) }
func healthGateFromV1(g healthGateV1) phases.HealthGate { return phases.HealthGate(g) }

func (d *v1Decoder) clusterSpec(s clusterSpecV1) phases.ClusterSpec {
	return phases.ClusterSpec{Name: s.Name, Kind: phases.ClusterKind(s.Kind), AdminCluster: s.AdminCluster, Channel: s.Channel,
		Version: d.version(s.Version), Pools: conv.Slice(s.Pools, poolFromV1),
		Cloud:       conv.Ptr(s.Cloud, func(c cloudSpecV1) phases.CloudSpec { return phases.CloudSpec(c) }),
		HealthGates: conv.Slice(s.HealthGates, healthGateFromV1), Labels: maps.Clone(s.Labels), EtcdBackup: s.EtcdBackup}
}

func instanceGroupToV1(g phases.InstanceGroup) instanceGroupV1   { return instanceGroupV1(g) }
func instanceGroupFromV1(g instanceGroupV1) phases.InstanceGroup { return phases.InstanceGroup(g) }

func poolToV1(p phases.Pool) poolV1 {
	s := p.Settings
	return poolV1{Name: p.Name, Role: string(p.Role), Backing: string(p.Backing),
		Settings: upgradeSettingsV1{ConcurrentNodes: s.ConcurrentNodes, MinimumAvailableNodes: s.MinimumAvailableNodes, Strategy: s.Strategy,
			MaxSurge: conv.Ptr(s.MaxSurge, conv.Same[int]), MaxUnavailable: conv.Ptr(s.MaxUnavailable, conv.Same[int]),
			BlueGreen: conv.Ptr(s.BlueGreen, func(b phases.BlueGreenSettings) blueGreenSettingsV1 {
				return blueGreenSettingsV1{BatchNodeCount: conv.Ptr(b.BatchNodeCount, conv.Same[int]), BatchPercentage: conv.Ptr(b.BatchPercentage, conv.Same[float64]),
					BatchSoak: b.BatchSoak, NodePoolSoak: conv.Ptr(b.NodePoolSoak, conv.Same[time.Duration])}
			}),
			MaxFailedNodes: conv.Ptr(s.MaxFailedNodes, conv.Same[int]), Rollback: s.Rollback, HealthGates: conv.Slice(s.HealthGates, healthGateToV1)},
		Nodes:  conv.Slice(p.Nodes, func(n phases.Node) nodeV1 { return nodeV1{Name: n.Name, Address: n.Address, Zone: n.Zone} }),
		Groups: conv.Slice(p.Groups, instanceGroupToV1), Spot: p.Spot,
		Autoscaling: conv.Ptr(p.Autoscaling, func(a phases.Autoscaling) autoscalingV1 { return autoscalingV1(a) })}
}

func poolFromV1(p poolV1) phases.Pool {
	s := p.Settings
	return phases.Pool{Name: p.Name, Role: phases.Role(p.Role), Backing: phases.Backing(p.Backing),
		Settings: phases.UpgradeSettings{ConcurrentNodes: s.ConcurrentNodes, MinimumAvailableNodes: s.MinimumAvailableNodes, Strategy: s.Strategy,
			MaxSurge: conv.Ptr(s.MaxSurge, conv.Same[int]), MaxUnavailable: conv.Ptr(s.MaxUnavailable, conv.Same[int]),
			BlueGreen: conv.Ptr(s.BlueGreen, func(b blueGreenSettingsV1) phases.BlueGreenSettings {
				return phases.BlueGreenSettings{BatchNodeCount: conv.Ptr(b.BatchNodeCount, conv.Same[int]), BatchPercentage: conv.Ptr(b.BatchPercentage, conv.Same[float64]),
					BatchSoak: b.BatchSoak, NodePoolSoak: conv.Ptr(b.NodePoolSoak, conv.Same[time.Duration])}
			}),
			MaxFailedNodes: conv.Ptr(s.MaxFailedNodes, conv.Same[int]), Rollback: s.Rollback, HealthGates: conv.Slice(s.HealthGates, healthGateFromV1)},
		Nodes:  conv.Slice(p.Nodes, func(n nodeV1) phases.Node { return phases.Node{Name: n.Name, Address: n.Address, Zone: n.Zone} }),
		Groups: conv.Slice(p.Groups, instanceGroupFromV1), Spot: p.Spot,
		Autoscaling: conv.Ptr(p.Autoscaling, func(a autoscalingV1) phases.Autoscaling { return phases.Autoscaling(a) })}
}
