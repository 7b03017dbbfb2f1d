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
	// MaxSurge and MaxUnavailable are the surge strategy's per-zone budget.
	MaxSurge       *int `json:"maxSurge,omitempty"`
	MaxUnavailable *int `json:"maxUnavailable,omitempty"`
}
