package api

// ClusterSpec is a cluster as an operator registers it (PUT
// /v1/clusters/{name}) and as the API shows it: its shape and the version
// it runs or, during an upgrade, the version it is going to. Kubeconfig
// gives the coordinator access to the cluster's API server; it is never
// returned.
type ClusterSpec struct {
	Name         string      `json:"name"`
	Kind         ClusterKind `json:"kind"`
	AdminCluster string      `json:"adminCluster,omitempty"`
	Channel      string      `json:"channel,omitempty"`
	// Version is a release version, "1.N.X"; empty when unknown.
	Version    string `json:"version"`
	Pools      []Pool `json:"pools"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Cloud names the cloud adapter of the cluster's MIG pools.
	Cloud *CloudSpec `json:"cloud,omitempty"`
	// HealthGates must hold after each node of every pool (SPEC §16,
	// docs/health.md), besides each pool's own.
	HealthGates []HealthGate `json:"healthGates,omitempty"`
	// Labels are the operator's key/value labels of the cluster: rollout
	// sequences select their stages' clusters by them
	// (docs/rollout-sequences.md).
	Labels map[string]string `json:"labels,omitempty"`
	// EtcdBackup is "" (the default: every upgrade takes an etcd snapshot
	// before its control plane, docs/backup.md) or "skip", for a cluster
	// whose control-plane hosts hold no etcd client credentials (an
	// external etcd backed up on its own).
	EtcdBackup string `json:"etcdBackup,omitempty"`
	// MaintenancePolicy, on PUT, is stored with the spec in one step,
	// validated as PUT .../maintenance-policy validates one: an invalid
	// policy refuses the whole request. Absent keeps the cluster's
	// policy; a new cluster registered without one is held from
	// automatic upgrades for the coordinator's registration hold
	// (docs/auto-upgrades.md). Like Kubeconfig, it is never returned
	// here: GET .../maintenance-policy returns it.
	MaintenancePolicy *MaintenancePolicy `json:"maintenancePolicy,omitempty"`
	// Adopt, on PUT of a new cluster, takes the version its nodes report
	// (the lowest kubelet the API server's Nodes show) as the cluster's
	// when it differs from Version, instead of refusing the registration
	// (rule cluster-version-observed). Never returned.
	Adopt bool `json:"adopt,omitempty"`
}

// HealthGate is a PromQL expression that must hold after each node of a
// pool before the pool goes on: it holds while the query
// (`/api/v1/query` of the Prometheus at Prometheus) returns a non-empty
// result, and must have held for For (whole seconds, "120s"; empty is 0)
// together with the node's other checks.
type HealthGate struct {
	Name       string `json:"name"`
	Expr       string `json:"expr"`
	For        string `json:"for,omitempty"`
	Prometheus string `json:"prometheus"`
}

// CloudSpec names the cloud adapter that drives a cluster's MIG pools:
// provider "gce" (with project) or "lab", and optionally the provider
// API's endpoint.
type CloudSpec struct {
	Provider string `json:"provider"`
	Project  string `json:"project,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
}

// ClusterKind is the role of a cluster in a fleet (SPEC §2).
type ClusterKind string

// Cluster kinds.
const (
	ClusterAdmin      ClusterKind = "admin"
	ClusterUser       ClusterKind = "user"
	ClusterHybrid     ClusterKind = "hybrid"
	ClusterStandalone ClusterKind = "standalone"
)

// Pool is a set of nodes with one role and one upgrade setting.
type Pool struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Backing is BackingBareMetal when empty.
	Backing  Backing         `json:"backing,omitempty"`
	Settings UpgradeSettings `json:"upgradeSettings,omitzero"`
	Nodes    []Node          `json:"nodes"`
	// Groups are a MIG pool's instance groups, one per zone, in the order
	// zones are upgraded. molt keeps a MIG pool's groups and nodes
	// current as it replaces instances.
	Groups []InstanceGroup `json:"groups,omitempty"`
	// Spot pools run preemptible instances: surge does not wait for a
	// replacement to be Ready before draining.
	Spot bool `json:"spot,omitempty"`
	// Autoscaling is the range the cluster autoscaler sizes each group
	// of a MIG pool in; blue/green pins it while it runs.
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`
}

// InstanceGroup is one managed instance group of a MIG pool.
type InstanceGroup struct {
	Zone string `json:"zone"`
	Name string `json:"name"`
}

// Autoscaling is the range the autoscaler may size a group in.
type Autoscaling struct {
	MinNodes int `json:"minNodes"`
	MaxNodes int `json:"maxNodes"`
}

// Role is what a pool's nodes run.
type Role string

// Pool roles.
const (
	RoleControlPlaneLB Role = "controlPlaneLB"
	RoleControlPlane   Role = "controlPlane"
	RoleLoadBalancer   Role = "loadBalancer"
	RoleWorker         Role = "worker"
)

// Backing says how a pool's nodes exist: hosts upgraded in place, or
// instances of a managed instance group replaced through a cloud adapter.
type Backing string

// Pool backings.
const (
	BackingBareMetal Backing = "bareMetal"
	BackingMIG       Backing = "mig"
)

// Node is one host of a pool.
type Node struct {
	Name    string `json:"name"`
	Address string `json:"address,omitempty"`
	Zone    string `json:"zone,omitempty"`
}

// UpgradeSettings control how fast a pool is upgraded (SPEC §6).
type UpgradeSettings struct {
	// ConcurrentNodes is how many nodes of a bare-metal pool are upgraded
	// at once (0 means 1; at most 20).
	ConcurrentNodes int `json:"concurrentNodes,omitempty"`
	// MinimumAvailableNodes is how many nodes of the pool stay schedulable.
	MinimumAvailableNodes int `json:"minimumAvailableNodes,omitempty"`
	// Strategy selects a MIG pool's strategy: "surge" (default) or
	// "blueGreen".
	Strategy string `json:"strategy,omitempty"`
	// MaxSurge and MaxUnavailable are the surge strategy's per-zone budget
	// (defaults 1 and 0; their sum 1..20).
	MaxSurge       *int `json:"maxSurge,omitempty"`
	MaxUnavailable *int `json:"maxUnavailable,omitempty"`
	// BlueGreenSettings configure the blueGreen strategy (GKE's names).
	BlueGreenSettings *BlueGreenSettings `json:"blueGreenSettings,omitempty"`
	// MaxFailedNodes is the pool's failure budget: the pool, and the
	// upgrade, fail when that many of its nodes failed (default 1).
	MaxFailedNodes *int `json:"maxFailedNodes,omitempty"`
	// Rollback is what a pool past its budget does: "manual" (default:
	// it fails; an operator may roll it back), "auto" (it rolls back at
	// once; not for control-plane pools) or "never".
	Rollback string `json:"rollback,omitempty"`
	// HealthGates must hold after each node of the pool, besides the
	// cluster's.
	HealthGates []HealthGate `json:"healthGates,omitempty"`
}

// BlueGreenSettings are a blue/green pool's batches and soaks. Durations
// are seconds with an "s" suffix, as GKE writes them ("3600s").
type BlueGreenSettings struct {
	StandardRolloutPolicy *StandardRolloutPolicy `json:"standardRolloutPolicy,omitempty"`
	// NodePoolSoakDuration is waited after the last batch (default
	// "3600s"); soaking ends at 7 days in all.
	NodePoolSoakDuration string `json:"nodePoolSoakDuration,omitempty"`
}

// StandardRolloutPolicy says how blue is drained: batchNodeCount nodes or
// batchPercentage (0–1, rounded down, at least 1) of the pool per batch,
// one node when neither is set; 0 skips the draining phase.
type StandardRolloutPolicy struct {
	BatchPercentage   *float64 `json:"batchPercentage,omitempty"`
	BatchNodeCount    *int     `json:"batchNodeCount,omitempty"`
	BatchSoakDuration string   `json:"batchSoakDuration,omitempty"`
}
