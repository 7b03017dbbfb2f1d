package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/phases"
)

// MIGSummary says which instance replaced which (surge) and how a
// blue/green pool ended, with its green groups; bare-metal pools are
// not its business.
func TestMIGSummary(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	c := &phases.ClusterSpec{Name: "lab", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.33.13"),
		Cloud: &phases.CloudSpec{Provider: phases.CloudLab, Endpoint: "http://127.0.0.1:1"},
		Pools: []phases.Pool{
			{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: "cp-1"}}},
			{Name: "mig", Role: phases.RoleWorker, Backing: phases.BackingMIG,
				Groups: []phases.InstanceGroup{{Zone: "zone-a", Name: "mig-a"}},
				Nodes:  []phases.Node{{Name: "mig-a-1", Zone: "zone-a"}}},
			{Name: "bg", Role: phases.RoleWorker, Backing: phases.BackingMIG,
				Groups:   []phases.InstanceGroup{{Zone: "zone-b", Name: "bg-b"}},
				Nodes:    []phases.Node{{Name: "bg-b-1", Zone: "zone-b"}},
				Settings: phases.UpgradeSettings{Strategy: phases.StrategyBlueGreen}},
		}}
	require.NoError(t, c.Validate())
	u := phases.NewUpgrade("lab-1.34.3-1", c, phases.MustParseVersion("1.34.3"), phases.Options{StepLayout: phases.CurrentStepLayout}, t0)
	n, _ := u.Node("mig-a-1")
	n.Current, n.Version, n.StartedAt, n.FinishedAt = "mig-a-k3x9q2", u.To, t0, t0.Add(42*time.Second)
	bg, _ := u.Pool("bg")
	bg.BlueGreen.Phase, bg.BlueGreen.RollbackFrom = phases.PhaseRolledBack, phases.PhaseDrainingBlue
	bg.BlueGreen.Green = []phases.GreenGroup{{Zone: "zone-b", Name: "bg-b-x7k2p", Nodes: []string{"bg-b-x7k2p-1"}}}
	require.Equal(t, "MIG pool mig (surge): instances replaced zone by zone\n"+
		"  zone-a   mig-a-1        → mig-a-k3x9q2   v1.34.3  42s\n"+
		"MIG pool bg (blue/green): ROLLED_BACK (rolled back from DRAINING_BLUE_POOL)\n"+
		"  green group zone-b/bg-b-x7k2p: bg-b-x7k2p-1\n", MIGSummary(u))
}
