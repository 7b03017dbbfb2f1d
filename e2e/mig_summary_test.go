package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// MIGSummary says which instance replaced which (surge) and how a
// blue/green pool ended, with its green groups; bare-metal pools are
// not its business.
func TestMIGSummary(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	u := &api.Upgrade{ID: "lab-1.34.3-1", Cluster: "lab", From: "1.33.13", To: "1.34.3", State: api.UpgradeRunning, CreatedAt: t0,
		Pools: []api.PoolTrack{
			{Name: "cp", Role: api.RoleControlPlane, Backing: api.BackingBareMetal, First: 0, Count: 1},
			{Name: "mig", Role: api.RoleWorker, Backing: api.BackingMIG, Strategy: api.StrategySurge, First: 1, Count: 1,
				Groups: []api.InstanceGroup{{Zone: "zone-a", Name: "mig-a"}}},
			{Name: "bg", Role: api.RoleWorker, Backing: api.BackingMIG, Strategy: api.StrategyBlueGreen, First: 2, Count: 1,
				Groups: []api.InstanceGroup{{Zone: "zone-b", Name: "bg-b"}},
				BlueGreen: &api.BlueGreenTrack{Phase: api.BlueGreenRolledBack, RollbackFrom: api.BlueGreenDrainingBlue,
					Green: []api.GreenGroup{{Zone: "zone-b", Name: "bg-b-x7k2p", Nodes: []string{"bg-b-x7k2p-1"}}}}},
		},
		Nodes: []api.NodeTask{
			{Node: "cp-1", Pool: "cp", State: api.StepPending, Version: "1.33.13"},
			{Node: "mig-a-1", Pool: "mig", Zone: "zone-a", State: api.StepDone, Current: "mig-a-k3x9q2", Version: "1.34.3", StartedAt: t0, FinishedAt: t0.Add(42 * time.Second)},
			{Node: "bg-b-1", Pool: "bg", Zone: "zone-b", State: api.StepPending, Version: "1.33.13"},
		}}
	require.Equal(t, "MIG pool mig (surge): instances replaced zone by zone\n"+
		"  zone-a   mig-a-1        → mig-a-k3x9q2   v1.34.3  42s\n"+
		"MIG pool bg (blue/green): ROLLED_BACK (rolled back from DRAINING_BLUE_POOL)\n"+
		"  green group zone-b/bg-b-x7k2p: bg-b-x7k2p-1\n", MIGSummary(u))
}
