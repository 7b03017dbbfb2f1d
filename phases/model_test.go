package phases

import (
	"fmt"
	"testing"

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
