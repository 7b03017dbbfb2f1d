package phases

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"
)

// InstanceGroup is one of a MIG pool's managed instance groups: the group
// of the pool in one zone.
type InstanceGroup struct {
	Zone string
	Name string
}

// CloudSpec names the cloud adapter that drives a cluster's MIG pools and
// where it works.
type CloudSpec struct {
	// Provider is the adapter: CloudGCE or CloudLab (CloudMemory only in
	// tests).
	Provider string
	// Project is the GCE project (gce only).
	Project string
	// Endpoint overrides the provider's API address (a private endpoint,
	// the lab's cloud service).
	Endpoint string
}

// Cloud adapters a cluster may name.
const (
	CloudGCE    = "gce"
	CloudLab    = "lab"
	CloudMemory = "memory"
)

// Autoscaling is the range the cluster autoscaler may size each group of a
// pool in.
type Autoscaling struct {
	MinNodes int
	MaxNodes int
}

// MaxGroupNameLen bounds instance group names (GCE's resource names: RFC
// 1035 labels of at most 63 characters).
const MaxGroupNameLen = 63

// validateCloud refuses a cloud adapter molt has none of (rule
// cloud-provider).
func validateCloud(c *CloudSpec) error {
	switch c.Provider {
	case CloudGCE:
		if c.Project == "" {
			return invalid("cloud-provider", "the gce adapter needs cloud.project")
		}
	case CloudLab, CloudMemory:
	default:
		return invalid("cloud-provider", "cloud adapter %q is not one of gce, lab", c.Provider)
	}
	return nil
}

func validateMIG(c *ClusterSpec, p *Pool) error {
	if p.Backing != BackingMIG {
		if len(p.Groups) > 0 || p.Spot || p.Autoscaling != nil {
			return invalid("pool-backing", "pool %s: groups, spot and autoscaling apply to mig pools only", p.Name)
		}
		return nil
	}
	if c.Cloud == nil {
		return invalid("cloud-required", "pool %s is backed by instance groups; the cluster needs a cloud adapter (cloud.provider)", p.Name)
	}
	if err := validateCloud(c.Cloud); err != nil {
		return err
	}
	if len(p.Groups) == 0 {
		return invalid("pool-groups", "mig pool %s names no instance group (groups: one per zone)", p.Name)
	}
	zones := map[string]bool{}
	for _, g := range p.Groups {
		if !DNSLabel(g.Name) || len(g.Name) > MaxGroupNameLen || g.Name[0] < 'a' || g.Name[0] > 'z' {
			return invalid("pool-groups", "pool %s: group name %q must be a lower-case RFC 1035 label", p.Name, g.Name)
		}
		if g.Zone == "" || len(g.Zone) > MaxFieldLen {
			return invalid("pool-groups", "pool %s: group %s needs a zone", p.Name, g.Name)
		}
		if zones[g.Zone] {
			return invalid("pool-groups", "pool %s: zone %s has two groups; a pool has one group per zone", p.Name, g.Zone)
		}
		zones[g.Zone] = true
	}
	for _, n := range p.Nodes {
		if !zones[n.Zone] {
			return invalid("node-zone", "pool %s: node %s is in zone %q, which has no group of the pool", p.Name, n.Name, n.Zone)
		}
	}
	if a := p.Autoscaling; a != nil && (a.MinNodes < 0 || a.MaxNodes < a.MinNodes || a.MaxNodes > MaxClusterNodes) {
		return invalid("pool-autoscaling", "pool %s: autoscaling needs 0 ≤ minNodes ≤ maxNodes ≤ %d", p.Name, MaxClusterNodes)
	}
	return nil
}

// Group returns the pool's instance group in zone.
func (p *Pool) Group(zone string) (InstanceGroup, bool) {
	for _, g := range p.Groups {
		if g.Zone == zone {
			return g, true
		}
	}
	return InstanceGroup{}, false
}

// ReplacementName is the deterministic name of the instance that replaces
// node in group for purpose (the upgrade's ID, or its rollback): the group
// name, '-', and 6 base-36 characters of a hash, at most 63 characters. A
// new leader that repeats the step asks for the same name, which the cloud
// adapter creates only once.
func ReplacementName(group, purpose, node string) string {
	return hashedName(group, "replacement\x00"+purpose+"\x00"+node, 6)
}

// GreenGroupName is the deterministic name of the green group blue/green
// creates beside blue group for an upgrade.
func GreenGroupName(blue, upgrade string) string {
	return hashedName(blue, "green\x00"+upgrade, 5)
}

func hashedName(prefix, purpose string, n int) string {
	sum := sha256.Sum256([]byte("molt\x00" + prefix + "\x00" + purpose))
	v := binary.BigEndian.Uint64(sum[:8])
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	suffix := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		suffix[i] = digits[v%36]
		v /= 36
	}
	if limit := MaxGroupNameLen - 1 - n; len(prefix) > limit {
		prefix = prefix[:limit]
	}
	return strings.TrimRight(prefix, "-") + "-" + string(suffix)
}
