package phases

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testCluster builds a cluster with the given pool sizes (cplb, cp, lb, and
// one worker pool per extra size).
func testCluster(cplb, cp, lb int, workers ...int) *ClusterSpec {
	c := &ClusterSpec{Name: "c1", Kind: KindStandalone, Version: MustParseVersion("1.33.6")}
	add := func(name string, role Role, n int) {
		if n == 0 {
			return
		}
		p := Pool{Name: name, Role: role}
		for i := 0; i < n; i++ {
			p.Nodes = append(p.Nodes, Node{Name: fmt.Sprintf("%s-%d", name, i), Zone: fmt.Sprintf("z%d", i%3)})
		}
		c.Pools = append(c.Pools, p)
	}
	add("cplb", RoleControlPlaneLB, cplb)
	add("cp", RoleControlPlane, cp)
	add("lb", RoleLoadBalancer, lb)
	for i, n := range workers {
		add(fmt.Sprintf("w%d", i), RoleWorker, n)
	}
	return c
}

func TestClusterValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(c *ClusterSpec)
		rule string
	}{
		{"ok", func(*ClusterSpec) {}, ""},
		{"bad name", func(c *ClusterSpec) { c.Name = "Bad_Name" }, "cluster-name"},
		{"bad kind", func(c *ClusterSpec) { c.Kind = "edge" }, "cluster-kind"},
		{"user needs admin", func(c *ClusterSpec) { c.Kind = KindUser }, "admin-cluster"},
		{"admin has none", func(c *ClusterSpec) { c.AdminCluster = "x" }, "admin-cluster"},
		{"no version", func(c *ClusterSpec) { c.Version = Version{} }, "cluster-version"},
		{"dup pool", func(c *ClusterSpec) { c.Pools[1].Name = c.Pools[0].Name }, "pool-name-duplicate"},
		{"dup node", func(c *ClusterSpec) { c.Pools[1].Nodes[0].Name = c.Pools[0].Nodes[0].Name }, "node-name-duplicate"},
		{"bad role", func(c *ClusterSpec) { c.Pools[0].Role = "gpu" }, "pool-role"},
		{"two cp", func(c *ClusterSpec) { c.Pools[0].Role = RoleControlPlane }, "control-plane-pool"},
		{"empty pool", func(c *ClusterSpec) { c.Pools[2].Nodes = nil }, "pool-empty"},
		{"concurrency", func(c *ClusterSpec) { c.Pools[3].Settings.ConcurrentNodes = 21 }, "concurrent-nodes"},
		{"min avail", func(c *ClusterSpec) { c.Pools[3].Settings.MinimumAvailableNodes = 4 }, "minimum-available-nodes"},
		{"mig cp", func(c *ClusterSpec) { c.Pools[1].Backing = BackingMIG }, "pool-backing"},
		{"strategy on bare metal", func(c *ClusterSpec) { c.Pools[3].Settings.Strategy = "surge" }, "strategy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster(1, 3, 1, 4)
			tc.mut(c)
			err := c.Validate()
			if tc.rule == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidCluster)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tc.rule, ve.Rule)
		})
	}
}

func TestAdmitBoundsAndNames(t *testing.T) {
	ptr := func(n int) *int { return &n }
	base := func() ClusterSpec {
		return ClusterSpec{Name: "lab", Kind: KindStandalone, Version: MustParseVersion("1.33.6"), Cloud: &CloudSpec{Provider: CloudGCE, Project: "p"}, Pools: []Pool{
			{Name: "cp", Role: RoleControlPlane, Nodes: []Node{{Name: "cp-1"}}},
			{Name: "workers", Role: RoleWorker, Backing: BackingMIG, Groups: []InstanceGroup{{Zone: "a", Name: "workers-a"}},
				Nodes: []Node{{Name: "w1.example.com", Zone: "a"}, {Name: "w2", Zone: "a"}}},
		}}
	}
	ok := base()
	require.NoError(t, ok.Admit())
	many := func(n int) []Node {
		out := make([]Node, n)
		for i := range out {
			out[i].Name = fmt.Sprintf("n%d", i)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		mutate func(*ClusterSpec)
		rule   string
	}{
		{"dot", func(c *ClusterSpec) { c.Name = "." }, "cluster-name"},
		{"dot dot", func(c *ClusterSpec) { c.Name = ".." }, "cluster-name"},
		{"dash", func(c *ClusterSpec) { c.Name = "-" }, "cluster-name"},
		{"leading dash", func(c *ClusterSpec) { c.Name = "-lab" }, "cluster-name"},
		{"dotted cluster", func(c *ClusterSpec) { c.Name = "a.b" }, "cluster-name"},
		{"64 characters", func(c *ClusterSpec) { c.Name = strings.Repeat("a", 64) }, "cluster-name"},
		{"dotted pool", func(c *ClusterSpec) { c.Pools[1].Name = "w.x" }, "pool-name"},
		{"node dot", func(c *ClusterSpec) { c.Pools[1].Nodes[0].Name = "." }, "node-name"},
		{"node empty label", func(c *ClusterSpec) { c.Pools[1].Nodes[0].Name = "a..b" }, "node-name"},
		{"node trailing dash", func(c *ClusterSpec) { c.Pools[1].Nodes[0].Name = "w1-" }, "node-name"},
		{"too many pools", func(c *ClusterSpec) {
			for i := range MaxPools {
				c.Pools = append(c.Pools, Pool{Name: fmt.Sprintf("p%d", i), Role: RoleWorker, Nodes: []Node{{Name: fmt.Sprintf("p%d-n", i)}}})
			}
		}, "pool-count"},
		{"too many nodes", func(c *ClusterSpec) { c.Pools[1].Nodes = many(MaxClusterNodes) }, "node-count"},
		{"negative surge", func(c *ClusterSpec) { c.Pools[1].Settings.MaxSurge = ptr(-1) }, "mig-surge"},
		{"huge unavailable", func(c *ClusterSpec) { c.Pools[1].Settings.MaxUnavailable = ptr(1 << 62) }, "mig-surge"},
		{"huge concurrency", func(c *ClusterSpec) { c.Pools[1].Settings.ConcurrentNodes = 1 << 62 }, "concurrent-nodes"},
		{"huge minimum available", func(c *ClusterSpec) { c.Pools[1].Settings.MinimumAvailableNodes = 1 << 62 }, "minimum-available-nodes"},
		{"long address", func(c *ClusterSpec) { c.Pools[1].Nodes[0].Address = strings.Repeat("a", MaxFieldLen+1) }, "node-field"},
		{"aws without mig pools", func(c *ClusterSpec) {
			c.Pools[1] = Pool{Name: "workers", Role: RoleWorker, Nodes: []Node{{Name: "w1"}}}
			c.Cloud.Provider = "aws"
			require.NoError(t, c.Validate(), "a spec logged with it still applies")
		}, "cloud-provider"},
		{"gce without project nor mig pools", func(c *ClusterSpec) {
			c.Pools[1] = Pool{Name: "workers", Role: RoleWorker, Nodes: []Node{{Name: "w1"}}}
			c.Cloud.Project = ""
		}, "cloud-provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mutate(&c)
			err := c.Admit()
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tc.rule, ve.Rule)
		})
	}
}

func TestCheckOptions(t *testing.T) {
	require.NoError(t, CheckOptions(Options{ConcurrentWorkerPools: MaxConcurrentWorkerPools}))
	for _, n := range []int{-1, MaxConcurrentWorkerPools + 1, 200_000_000, 1 << 62} {
		var ve *ValidationError
		require.ErrorAs(t, CheckOptions(Options{ConcurrentWorkerPools: n}), &ve, "%d", n)
		require.Equal(t, "concurrent-worker-pools", ve.Rule)
	}
	// Plans of an unchecked option stay bounded.
	c := ClusterSpec{Name: "lab", Kind: KindStandalone, Version: MustParseVersion("1.33.6"), Pools: []Pool{{Name: "cp", Role: RoleControlPlane, Nodes: []Node{{Name: "cp-1"}}}}}
	_ = MakePlan(&c, MustParseVersion("1.34.0"), Options{ConcurrentWorkerPools: 1 << 62}, DefaultDurations(), time.Time{})
}
