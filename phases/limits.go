package phases

import (
	"strings"
)

// Bounds of what a request may ask for. Admit and CheckOptions enforce
// them before anything is proposed; docs/api.md lists them. They keep
// every number an operator sends within what the engine handles without
// large allocations (the planner allocates per worker-pool slot, the
// tracker per node).
const (
	// MaxPools bounds a cluster's pools.
	MaxPools = 100
	// MaxClusterNodes bounds a cluster's nodes, all pools together.
	MaxClusterNodes = 20_000
	// MaxMIGSurge bounds a MIG pool's maxSurge and maxUnavailable (per
	// zone).
	MaxMIGSurge = 100
	// MaxConcurrentWorkerPools bounds an upgrade's concurrentWorkerPools:
	// no cluster has more worker pools than pools.
	MaxConcurrentWorkerPools = MaxPools
	// MaxNameLen bounds cluster, pool and node names (a DNS label's 63).
	MaxNameLen = 63
	// MaxFieldLen bounds a node's address and zone and a cluster's channel.
	MaxFieldLen = 253
)

// Admit checks a cluster spec a request brings: Validate, and on top the
// bounds above, names that are safe in URLs and a cloud adapter molt has
// whenever one is named (Validate checks it for MIG pools only). Validate
// alone is what the state machine checks again when an entry applies, also
// for entries written while looser rules admitted them; Admit is for new
// requests.
//
// Cluster and pool names are DNS labels: 1–63 characters of a–z, 0–9 and
// '-', starting and ending with a letter or digit. Node names are DNS
// labels joined by '.', at most 63 characters in all (Kubernetes node
// names are often host names).
func (c *ClusterSpec) Admit() error {
	if err := CheckClusterName(c.Name); err != nil {
		return err
	}
	if c.AdminCluster != "" && !DNSLabel(c.AdminCluster) {
		return invalid("admin-cluster", "admin cluster %q is not a valid cluster name", c.AdminCluster)
	}
	if len(c.Channel) > MaxFieldLen {
		return invalid("channel", "channel is %d bytes, at most %d", len(c.Channel), MaxFieldLen)
	}
	if len(c.Pools) > MaxPools {
		return invalid("pool-count", "%d pools; at most %d", len(c.Pools), MaxPools)
	}
	if n := c.NodeCount(); n > MaxClusterNodes {
		return invalid("node-count", "%d nodes; at most %d", n, MaxClusterNodes)
	}
	for _, p := range c.Pools {
		if !DNSLabel(p.Name) {
			return invalid("pool-name", "pool name %q must be a DNS label", p.Name)
		}
		for _, n := range p.Nodes {
			if !NodeName(n.Name) {
				return invalid("node-name", "pool %s: node name %q must be DNS labels joined by '.', at most %d characters", p.Name, n.Name, MaxNameLen)
			}
			if len(n.Address) > MaxFieldLen || len(n.Zone) > MaxFieldLen {
				return invalid("node-field", "pool %s: node %s: address and zone are at most %d bytes", p.Name, n.Name, MaxFieldLen)
			}
		}
		for i, v := range []*int{p.Settings.MaxSurge, p.Settings.MaxUnavailable} {
			if v != nil && (*v < 0 || *v > MaxMIGSurge) {
				return invalid("mig-surge", "pool %s: %s %d is outside 0..%d", p.Name, [...]string{"maxSurge", "maxUnavailable"}[i], *v, MaxMIGSurge)
			}
		}
	}
	if c.Cloud != nil {
		// Validate checks the cloud only for MIG pools (what it drives);
		// a cluster that names one names one molt has an adapter for.
		if err := validateCloud(c.Cloud); err != nil {
			return err
		}
	}
	return c.Validate()
}

// CheckClusterName refuses a name no cluster can be registered under
// (rule cluster-name): Admit's rule, for everything else that names a
// cluster before it exists (a bootstrap token).
func CheckClusterName(name string) error {
	if !DNSLabel(name) {
		return invalid("cluster-name", "cluster name %q must be a DNS label: 1–%d characters of a-z, 0-9 and '-', starting and ending with a letter or digit", name, MaxNameLen)
	}
	return nil
}

// CheckOptions checks an upgrade's options against their bounds.
func CheckOptions(o Options) error {
	if o.ConcurrentWorkerPools < 0 || o.ConcurrentWorkerPools > MaxConcurrentWorkerPools {
		return invalid("concurrent-worker-pools", "concurrentWorkerPools %d is outside 0..%d", o.ConcurrentWorkerPools, MaxConcurrentWorkerPools)
	}
	if len(o.EmergencyReason) > MaxReasonLen {
		return invalid("emergency-reason", "an emergency reason is at most %d bytes", MaxReasonLen)
	}
	return nil
}

// MaxReasonLen bounds an emergency override's reason (kept in the audit
// trail).
const MaxReasonLen = 1024

// DNSLabel reports whether s is a DNS label (RFC 1123): 1–63 characters
// of a–z, 0–9 and '-', starting and ending with a letter or digit.
func DNSLabel(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		alnum := ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9'
		if !alnum && (ch != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// NodeName reports whether s is DNS labels joined by '.', at most 63
// characters in all.
func NodeName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !DNSLabel(l) {
			return false
		}
	}
	return true
}
