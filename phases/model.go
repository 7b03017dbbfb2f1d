package phases

import (
	"errors"
	"fmt"
)

// ClusterKind is the role of a cluster in a fleet (SPEC §2).
type ClusterKind string

// Cluster kinds.
const (
	KindAdmin      ClusterKind = "admin"
	KindUser       ClusterKind = "user"
	KindHybrid     ClusterKind = "hybrid"
	KindStandalone ClusterKind = "standalone"
)

// Role is what a pool's nodes run, which decides when in the upgrade they go
// and what is upgraded on them.
type Role string

// Pool roles.
const (
	RoleControlPlaneLB Role = "controlPlaneLB"
	RoleControlPlane   Role = "controlPlane"
	RoleLoadBalancer   Role = "loadBalancer"
	RoleWorker         Role = "worker"
)

// Backing says how a pool's nodes exist: fixed hosts upgraded in place, or
// instances of a managed instance group replaced through a cloud adapter.
type Backing string

// Pool backings.
const (
	BackingBareMetal Backing = "bareMetal"
	BackingMIG       Backing = "mig"
)

// Node is one host of a pool.
type Node struct {
	Name    string
	Address string
	Zone    string
}

// Pool is a set of nodes with one role and one upgrade setting.
type Pool struct {
	Name     string
	Role     Role
	Backing  Backing
	Settings UpgradeSettings
	Nodes    []Node
	// Groups are a MIG pool's instance groups, one per zone, in the order
	// zones are upgraded (mig.go). molt keeps Nodes and Groups of a MIG
	// pool current as it replaces instances.
	Groups []InstanceGroup
	// Spot pools run preemptible instances: surge does not wait for a
	// replacement to be Ready before draining the node it replaces.
	Spot bool
	// Autoscaling is the range the cluster autoscaler may size each of the
	// pool's groups in (nil: not autoscaled). Blue/green pins it while it
	// runs and restores it from here.
	Autoscaling *Autoscaling
}

// ClusterSpec is a cluster as registered: its shape and the version it runs
// or, during an upgrade, the version it is going to.
type ClusterSpec struct {
	Name         string
	Kind         ClusterKind
	AdminCluster string
	Channel      string
	Version      Version
	Pools        []Pool
	// Cloud says which cloud adapter drives the cluster's MIG pools (nil
	// when it has none).
	Cloud *CloudSpec
	// HealthGates must hold after each node of every pool (health.go).
	HealthGates []HealthGate
	// Labels are the operator's key/value labels of the cluster; rollout
	// sequences select their stages' clusters by them.
	Labels map[string]string
	// EtcdBackup is EtcdBackupTake ("", the default: upgrades take an etcd
	// snapshot before the control plane, backup.go) or EtcdBackupSkip.
	EtcdBackup string
}

// Model validation errors.
var (
	ErrInvalidCluster = errors.New("invalid cluster")
)

// ValidationError is a refusal of a cluster shape, naming its rule.
type ValidationError struct {
	Rule   string
	Detail string
}

func (e *ValidationError) Error() string { return e.Rule + ": " + e.Detail }

// Unwrap ties every validation error to ErrInvalidCluster.
func (e *ValidationError) Unwrap() error { return ErrInvalidCluster }

func invalid(rule, format string, args ...any) error {
	return &ValidationError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// Validate checks a cluster spec's shape: known kind, roles and backings,
// unique names, a control plane, settings within bounds.
func (c *ClusterSpec) Validate() error {
	if !validName(c.Name) {
		return invalid("cluster-name", "cluster name %q must be 1–63 characters of a-z, 0-9, '-' and '.'", c.Name)
	}
	switch c.Kind {
	case KindAdmin, KindHybrid, KindStandalone:
		if c.AdminCluster != "" {
			return invalid("admin-cluster", "a %s cluster has no admin cluster", c.Kind)
		}
	case KindUser:
		if c.AdminCluster == "" {
			return invalid("admin-cluster", "a user cluster must name its admin cluster")
		}
	default:
		return invalid("cluster-kind", "kind %q is not one of admin, user, hybrid, standalone", c.Kind)
	}
	if c.Version.IsZero() {
		return invalid("cluster-version", "version (what the cluster runs now) is required")
	}
	if err := validateGates("cluster "+c.Name, c.HealthGates); err != nil {
		return err
	}
	if c.EtcdBackup != EtcdBackupTake && c.EtcdBackup != EtcdBackupSkip {
		return invalid(RuleEtcdBackup, "etcdBackup %q is not one of \"\" (take a snapshot before the control plane) or %q", c.EtcdBackup, EtcdBackupSkip)
	}
	pools := map[string]bool{}
	nodes := map[string]bool{}
	cp := 0
	for i := range c.Pools {
		p := &c.Pools[i]
		if !validName(p.Name) {
			return invalid("pool-name", "pool name %q is not valid", p.Name)
		}
		if pools[p.Name] {
			return invalid("pool-name-duplicate", "pool %q appears twice", p.Name)
		}
		pools[p.Name] = true
		switch p.Role {
		case RoleControlPlaneLB, RoleLoadBalancer, RoleWorker:
		case RoleControlPlane:
			cp++
		default:
			return invalid("pool-role", "pool %s: role %q is not one of controlPlaneLB, controlPlane, loadBalancer, worker", p.Name, p.Role)
		}
		switch p.Backing {
		case "":
			p.Backing = BackingBareMetal
		case BackingBareMetal, BackingMIG:
		default:
			return invalid("pool-backing", "pool %s: backing %q is not bareMetal or mig", p.Name, p.Backing)
		}
		if p.Backing == BackingMIG && (p.Role == RoleControlPlane || p.Role == RoleControlPlaneLB) {
			return invalid("pool-backing", "pool %s: control-plane pools are bare metal", p.Name)
		}
		if err := validateMIG(c, p); err != nil {
			return err
		}
		if len(p.Nodes) == 0 {
			return invalid("pool-empty", "pool %s has no nodes", p.Name)
		}
		for _, n := range p.Nodes {
			if !validName(n.Name) {
				return invalid("node-name", "pool %s: node name %q is not valid", p.Name, n.Name)
			}
			if nodes[n.Name] {
				return invalid("node-name-duplicate", "node %q appears twice in the cluster", n.Name)
			}
			nodes[n.Name] = true
		}
		if err := p.Settings.Validate(p); err != nil {
			return err
		}
	}
	if cp != 1 {
		return invalid("control-plane-pool", "a cluster has exactly one controlPlane pool, found %d", cp)
	}
	return nil
}

// Pool returns the pool of that name.
func (c *ClusterSpec) Pool(name string) (*Pool, bool) {
	for i := range c.Pools {
		if c.Pools[i].Name == name {
			return &c.Pools[i], true
		}
	}
	return nil, false
}

// HasNode reports whether a pool of the cluster holds a node of that name.
func (c *ClusterSpec) HasNode(name string) bool {
	for _, p := range c.Pools {
		for _, n := range p.Nodes {
			if n.Name == name {
				return true
			}
		}
	}
	return false
}

// NodeCount is the number of nodes in all pools.
func (c *ClusterSpec) NodeCount() int {
	n := 0
	for _, p := range c.Pools {
		n += len(p.Nodes)
	}
	return n
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
