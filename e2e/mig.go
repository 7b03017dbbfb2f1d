package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/lab"
)

// MIGPool is the MIG-backed worker pool Up adds beside the lab's
// bare-metal pools: one instance group of the lab's (lab.Groups) per zone,
// driven by the coordinator through the "lab" cloud adapter. Its
// instances are lab hosts that join the cluster as workers, each with
// molt-agent enrolled like every host's.
type MIGPool struct {
	// Name is the pool's name.
	Name string
	// Zones get a group each, named <Name>-<zone's last part>, upgraded
	// in this order.
	Zones []string
	// Size is each group's number of instances.
	Size int
	// Settings are the pool's upgradeSettings (surge or blueGreen).
	Settings api.UpgradeSettings
}

// DefaultMIGPool is the lab's MIG pool: 2 zones × 1 instance, surge with
// maxSurge 1.
func DefaultMIGPool() *MIGPool {
	one := 1
	return &MIGPool{Name: "mig", Zones: []string{"zone-a", "zone-b"}, Size: 1,
		Settings: api.UpgradeSettings{Strategy: api.StrategySurge, MaxSurge: &one}}
}

// groups are the pool's groups as Up creates them.
func (m *MIGPool) groups() []api.InstanceGroup {
	out := make([]api.InstanceGroup, 0, len(m.Zones))
	for _, z := range m.Zones {
		out = append(out, api.InstanceGroup{Zone: z, Name: m.Name + "-" + z[strings.LastIndex(z, "-")+1:]})
	}
	return out
}

// upMIG serves the lab's instance groups, with molt-agent installed in
// every instance they boot (a bootstrap token of their own), and creates
// the pool's groups at the lab's version. The caller registers the
// cluster (the groups must exist) and waits for the Nodes.
func (e *Env) upMIG(ctx context.Context, agentBin, script string, urls []string) error {
	m := e.cfg.MIG
	// Instances come and go with every upgrade of the pool: enough uses
	// for many, for as long as a test or a kept demo lives.
	var tok api.Token
	req := api.TokenRequest{Kind: api.TokenBootstrap, Cluster: ClusterName, TTL: "24h", Uses: 200, Description: "lab instance groups' agents"}
	if _, err := e.API().Do(ctx, http.MethodPost, "/v1/tokens", req, &tok); err != nil {
		return fmt.Errorf("bootstrap token for instances: %w", err)
	}
	// Kept for `molt-lab serve-groups --token-file` (after a demo --keep).
	if err := os.WriteFile(e.InstancesTokenFile(), []byte(tok.Secret+"\n"), 0o600); err != nil {
		return err
	}
	svc, err := e.Lab.ServeGroups(lab.GroupsConfig{AfterInstance: func(ctx context.Context, h *lab.Host, spec lab.HostSpec) error {
		return lab.InstallAgent(ctx, h, script, agentBin,
			"coordinator="+strings.Join(urls, ","), "token="+tok.Secret, "ca_pin="+e.caPin, "cluster="+ClusterName, "node="+spec.Name)
	}})
	if err != nil {
		return err
	}
	e.groups = svc
	p, err := svc.Client()
	if err != nil {
		return err
	}
	version := e.Lab.Config().Version
	tmpl, err := p.EnsureTemplate(ctx, cloud.TemplateSpec{Release: version}, "e2e/up/template")
	if err != nil {
		return err
	}
	for _, g := range m.groups() {
		e.step("instance group %s in %s: %d instance(s) at v%s (template %s)", g.Name, g.Zone, m.Size, version, tmpl)
		if err := p.CreateGroup(ctx, cloud.GroupRef{Zone: g.Zone, Name: g.Name}, tmpl, m.Size, "e2e/up/"+g.Zone); err != nil {
			return err
		}
	}
	return nil
}

// migPool is the pool as registration puts it: its current groups (molt
// keeps them current; blue/green swaps them) and no nodes, which the
// coordinator fills from the groups' instances.
func (e *Env) migPool(ctx context.Context) api.Pool {
	m := e.cfg.MIG
	pool := api.Pool{Name: m.Name, Role: api.RoleWorker, Backing: api.BackingMIG, Groups: m.groups(), Settings: m.Settings}
	if c, err := e.Cluster(ctx); err == nil {
		for _, p := range c.Spec.Pools {
			if p.Name == m.Name && len(p.Groups) > 0 {
				pool.Groups = p.Groups
			}
		}
	}
	return pool
}

// InstancesTokenFile holds the bootstrap token the MIG pool's instances'
// agents enroll with.
func (e *Env) InstancesTokenFile() string { return filepath.Join(e.cfg.WorkDir, "instances.token") }

// GroupService is the lab's instance-group service (nil without a MIG
// pool).
func (e *Env) GroupService() *lab.GroupService { return e.groups }

// MIG is the MIG pool's configuration (nil without one).
func (e *Env) MIG() *MIGPool { return e.cfg.MIG }

// SetMIGSettings registers the cluster again as the coordinator has it,
// with the MIG pool's upgradeSettings replaced (say, blue/green instead of
// surge): its version, groups, nodes and everything else stay.
func (e *Env) SetMIGSettings(ctx context.Context, s api.UpgradeSettings) error {
	if e.cfg.MIG == nil {
		return fmt.Errorf("the environment has no MIG pool")
	}
	e.cfg.MIG.Settings = s
	c, err := e.Cluster(ctx)
	if err != nil {
		return err
	}
	spec := c.Spec
	spec.Kubeconfig = e.kubeconfig // never returned
	for i := range spec.Pools {
		if spec.Pools[i].Name == e.cfg.MIG.Name {
			spec.Pools[i].Settings = s
		}
	}
	_, err = e.API().Do(ctx, http.MethodPut, "/v1/clusters/"+ClusterName, spec, nil)
	return err
}

// WaitMIGNodes waits until every node of the MIG pool, as the coordinator
// lists it, is a Ready Node whose kubelet runs version.
func (e *Env) WaitMIGNodes(ctx context.Context, version string, timeout time.Duration) error {
	if e.cfg.MIG == nil {
		return nil
	}
	var last string
	err := poll(ctx, timeout, func() (bool, error) {
		names, err := e.PoolNodes(ctx, e.cfg.MIG.Name)
		if err != nil || len(names) == 0 {
			last = fmt.Sprintf("pool nodes: %v", err)
			return false, nil
		}
		nodes, err := e.Lab.Nodes(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var missing []string
		for _, n := range names {
			i := slices.IndexFunc(nodes, func(k kube.NodeInfo) bool { return k.Name == n })
			if i < 0 || !nodes[i].Ready || nodes[i].KubeletVersion != "v"+version {
				missing = append(missing, n)
			}
		}
		last = "not Ready at v" + version + ": " + strings.Join(missing, " ")
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("MIG pool %s: %s: %w", e.cfg.MIG.Name, last, err)
	}
	return nil
}

// PoolNodes lists a pool's nodes as the coordinator has them.
func (e *Env) PoolNodes(ctx context.Context, pool string) ([]string, error) {
	c, err := e.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range c.Spec.Pools {
		if p.Name == pool {
			var out []string
			for _, n := range p.Nodes {
				out = append(out, n.Name)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("cluster %s has no pool %s", ClusterName, pool)
}

// NodeCount is the number of nodes the cluster's pools list: the lab's
// hosts and the MIG pool's instances.
func (e *Env) NodeCount(ctx context.Context) (int, error) {
	c, err := e.Cluster(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range c.Spec.Pools {
		n += len(p.Nodes)
	}
	return n, nil
}

// PoolCommand posts cancel, resume, rollback or complete for a pool of the
// cluster's upgrade.
func (e *Env) PoolCommand(ctx context.Context, pool, cmd string) error {
	_, err := e.API().Do(ctx, http.MethodPost, "/v1/clusters/"+ClusterName+"/pools/"+pool+"/upgrade:"+cmd, struct{}{}, nil)
	return err
}

// MIGSummary says what an upgrade did to the MIG pools: for surge, which
// instance replaced which; for blue/green, the phases' outcome and the
// green groups.
func MIGSummary(u *api.Upgrade) string {
	var b strings.Builder
	for i := range u.Pools {
		p := &u.Pools[i]
		if p.Backing != api.BackingMIG {
			continue
		}
		if bg := p.BlueGreen; bg != nil {
			fmt.Fprintf(&b, "MIG pool %s (blue/green): %s", p.Name, bg.Phase)
			if bg.RollbackFrom != "" {
				fmt.Fprintf(&b, " (rolled back from %s)", bg.RollbackFrom)
			}
			b.WriteString("\n")
			for _, g := range bg.Green {
				fmt.Fprintf(&b, "  green group %s/%s: %s\n", g.Zone, g.Name, strings.Join(g.Nodes, ", "))
			}
			continue
		}
		fmt.Fprintf(&b, "MIG pool %s (%s): instances replaced zone by zone\n", p.Name, p.Strategy)
		for _, n := range u.PoolNodes(p) {
			took := n.FinishedAt.Sub(n.StartedAt).Round(100 * time.Millisecond)
			fmt.Fprintf(&b, "  %-8s %-14s → %-14s v%s  %s\n", n.Zone, n.Node, liveName(&n), n.Version, took)
		}
	}
	return b.String()
}
