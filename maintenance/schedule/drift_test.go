package schedule

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDriftBlocksAutomaticUpgrade: a due patch upgrade does not start on
// a cluster with a drifted node; blockedBy names each node, and the step
// starts once the node agrees with the record again.
func TestDriftBlocksAutomaticUpgrade(t *testing.T) {
	cat := catalog("1.33.5", "1.33.4", "1.33.5")
	c := cluster("a", "1.33.4")
	c.Drift = map[string]string{"w-2": "kubelet 1.34.4, recorded 1.33.4", "w-1": "kubelet 1.33.1, recorded 1.33.4"}
	d := one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, ActNone, d.Action)
	require.Equal(t, StateBlockedByRule, d.Status.State)
	require.Equal(t, []Block{
		{Kind: BlockDrift, Name: "w-1", Detail: "node w-1 runs other versions than molt recorded: kubelet 1.33.1, recorded 1.33.4"},
		{Kind: BlockDrift, Name: "w-2", Detail: "node w-2 runs other versions than molt recorded: kubelet 1.34.4, recorded 1.33.4"},
	}, d.Status.BlockedBy)
	require.True(t, d.Status.NextOpportunity.IsZero(), "only a change on the hosts ends drift")

	c.Drift = nil
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, ActStart, d.Action)
}
