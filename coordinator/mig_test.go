package coordinator_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/memory"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/phases"
)

// memoryClouds gives every member the same in-memory cloud, as members of
// one coordinator reach the same provider.
type memoryClouds struct{ c *memory.Cloud }

func (m memoryClouds) Provider(spec phases.CloudSpec) (cloud.Provider, error) {
	if spec.Provider != phases.CloudMemory {
		return nil, fmt.Errorf("no %s adapter in this test", spec.Provider)
	}
	return m.c, nil
}

// withCloud configures members with the in-memory cloud and short cloud
// waits.
func withCloud(c *memory.Cloud) func(*coordinator.Config) {
	return func(cfg *coordinator.Config) {
		cfg.Clouds = memoryClouds{c}
		cfg.InstancePoll = 5 * time.Millisecond
		cfg.CloudRetryInterval = 50 * time.Millisecond
	}
}

const baseTemplate = "base-1-33-6"

// newMIGCloud makes groups (zone, name, size) from the base template with
// their instances running.
func newMIGCloud(t *testing.T, groups ...cloud.Group) *memory.Cloud {
	c := memory.New(memory.Options{Templates: []string{baseTemplate}, ListsToRun: 2})
	ctx := context.Background()
	for _, g := range groups {
		require.NoError(t, c.CreateGroup(ctx, g.GroupRef, baseTemplate, g.TargetSize, "setup/"+g.String()))
	}
	c.Advance()
	return c
}

// migSpec is a cluster with one bare-metal control-plane node and the MIG
// pools given, their nodes left for registration to fill from the groups.
func migSpec(pools ...api.Pool) api.ClusterSpec {
	spec := api.ClusterSpec{Name: "cloudy", Kind: api.ClusterStandalone, Version: "1.33.6", Kubeconfig: "apiVersion: v1\nkind: Config\n",
		Cloud: &api.CloudSpec{Provider: phases.CloudMemory},
		Pools: []api.Pool{{Name: "cp", Role: api.RoleControlPlane, Nodes: []api.Node{{Name: "cp-1", Address: "10.0.0.1"}}}}}
	spec.Pools = append(spec.Pools, pools...)
	return spec
}

func getCluster(t *testing.T, cl *client.Client, name string) api.Cluster {
	t.Helper()
	var c api.Cluster
	_, err := cl.Do(context.Background(), http.MethodGet, "/v1/clusters/"+name, nil, &c)
	require.NoError(t, err)
	return c
}

// creates counts, per instance or group name, the create calls the cloud
// carried out (repeats of a known request ID change nothing and do not
// count).
func creates(c *memory.Cloud) map[string]int {
	out := changedBy(c, "CreateInstances")
	for _, call := range c.Calls() {
		if call.Method == "CreateGroup" && !call.Repeat && call.Err == nil {
			out[call.Group.Name]++
		}
	}
	return out
}

// deletes counts the DeleteInstances calls that changed something, by
// their names argument.
func deletes(c *memory.Cloud) map[string]int { return changedBy(c, "DeleteInstances") }

// changedBy counts the calls of method that changed something (not a
// repeat, no error), by their arguments.
func changedBy(c *memory.Cloud, method string) map[string]int {
	out := map[string]int{}
	for _, call := range c.Calls() {
		if call.Method == method && !call.Repeat && call.Err == nil {
			out[call.Args]++
		}
	}
	return out
}

// TestMIGUpgradeSurvivesLeaderKills upgrades a surge pool of two zones and a
// blue/green pool through the in-memory cloud on three members, killing
// the leader while the surge pool replaces its first node and again while
// blue/green drains. The upgrade ends done; every replacement and green
// group was created once; the surge pool's nodes are its replacements,
// zone by zone; the blue/green pool is the green groups; nothing of the
// old instances is left.
func TestMIGUpgradeSurvivesLeaderKills(t *testing.T) {
	mem := newMIGCloud(t,
		cloud.Group{GroupRef: cloud.GroupRef{Zone: "zone-a", Name: "surge-a"}, TargetSize: 2},
		cloud.Group{GroupRef: cloud.GroupRef{Zone: "zone-b", Name: "surge-b"}, TargetSize: 1},
		cloud.Group{GroupRef: cloud.GroupRef{Zone: "zone-a", Name: "bg-a"}, TargetSize: 2})
	ops := newFakeOps()
	tc := newTestCluster(t, 3, ops, withCloud(mem))
	cl := tc.anyClient(1)
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	one := 1
	spec := migSpec(
		api.Pool{Name: "surge", Role: api.RoleWorker, Backing: api.BackingMIG,
			Groups:   []api.InstanceGroup{{Zone: "zone-a", Name: "surge-a"}, {Zone: "zone-b", Name: "surge-b"}},
			Settings: api.UpgradeSettings{MaxSurge: &one}},
		api.Pool{Name: "bg", Role: api.RoleWorker, Backing: api.BackingMIG,
			Groups:      []api.InstanceGroup{{Zone: "zone-a", Name: "bg-a"}},
			Autoscaling: &api.Autoscaling{MinNodes: 1, MaxNodes: 4},
			Settings: api.UpgradeSettings{Strategy: phases.StrategyBlueGreen, BlueGreenSettings: &api.BlueGreenSettings{
				StandardRolloutPolicy: &api.StandardRolloutPolicy{BatchNodeCount: &one}, NodePoolSoakDuration: "1s"}}},
	)
	put(t, cl, "/v1/clusters/cloudy", spec)
	reg := getCluster(t, cl, "cloudy")
	var surgeNodes, blueNodes []string
	for _, p := range reg.Spec.Pools {
		for _, n := range p.Nodes {
			switch p.Name {
			case "surge":
				surgeNodes = append(surgeNodes, n.Name)
			case "bg":
				blueNodes = append(blueNodes, n.Name)
			}
		}
	}
	require.Len(t, surgeNodes, 3, "registration lists the groups' instances as the pool's nodes")
	require.Len(t, blueNodes, 2)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runAgents(ctx, tc, "cloudy", bareMetalNodes(reg.Spec))
	startFleet(ctx, tc, "cloudy", mem, "1.33.6")
	waitAgents(t, tc, "cloudy", 6)
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/cloudy/upgrade", api.UpgradeRequest{Version: "1.34.4", ConcurrentWorkerPools: 2}, nil)
	require.NoError(t, err)

	kill := func(what string, cond func(u *phases.Upgrade) bool) {
		eventually(t, what, func() bool {
			u, err := getUpgrade(ctx, tc.anyClient(0), "cloudy")
			return err == nil && u != nil && cond(u)
		})
		old := tc.waitLeader()
		raftAddr := old.c.Store().RaftAddr()
		old.stop(true)
		require.NotEqual(t, old.id, tc.waitLeader().id)
		t.Logf("leader %s killed: %s", old.id, what)
		// Back from its disk, so the next kill leaves a quorum.
		back := startMemberAt(t, old.id, old.dir, false, ops, old.addr, raftAddr, nil, withCloud(mem))
		var ms []*member
		for _, m := range tc.list() {
			if m != old {
				ms = append(ms, m)
			}
		}
		tc.replace(append(ms, back))
	}
	// The kills aim at a moment (a replacement being made, blue draining)
	// but wait for "at or past it": a poll of a loaded machine can miss a
	// moment that passes in milliseconds, and what is asserted below holds
	// wherever the leader died.
	kill("the first surge replacement started", func(u *phases.Upgrade) bool {
		n, _ := u.Node(surgeNodes[0])
		return n.State != phases.StatePending
	})
	kill("blue/green draining or past it", func(u *phases.Upgrade) bool {
		p, _ := u.Pool("bg")
		if p.BlueGreen == nil {
			return false
		}
		switch p.BlueGreen.Phase {
		case phases.PhaseCreatingGreen, phases.PhaseCordoningBlue, "":
			return false
		}
		return true
	})

	var final api.Cluster
	eventually(t, "upgrade done", func() bool {
		final = api.Cluster{}
		_, err := tc.anyClient(0).Do(ctx, http.MethodGet, "/v1/clusters/cloudy", nil, &final)
		return err == nil && final.Status.Upgrade != nil && final.Status.Upgrade.State == api.UpgradeDone
	})
	require.Equal(t, "1.34.4", final.Status.Version)
	require.Equal(t, map[string]int{"1.34.4": 6}, final.Status.Versions)

	for name, n := range creates(mem) {
		require.Equal(t, 1, n, "%s created %d times", name, n)
	}
	u, err := convert.UpgradeFromAPI(final.Status.Upgrade)
	require.NoError(t, err)
	surge, _ := u.Pool("surge")
	ctxb := context.Background()
	var live []string
	for _, n := range u.PoolNodes(surge) {
		require.NotEmpty(t, n.Current, "node %s was replaced", n.Node)
		live = append(live, n.Current)
	}
	for _, p := range final.Spec.Pools {
		var names []string
		for _, n := range p.Nodes {
			names = append(names, n.Name)
		}
		switch p.Name {
		case "surge":
			require.ElementsMatch(t, live, names, "the pool's nodes are the replacements")
			require.Equal(t, []api.InstanceGroup{{Zone: "zone-a", Name: "surge-a"}, {Zone: "zone-b", Name: "surge-b"}}, p.Groups)
		case "bg":
			bg, _ := u.Pool("bg")
			require.Equal(t, phases.PhaseCompleted, bg.BlueGreen.Phase)
			require.Equal(t, []api.InstanceGroup{{Zone: "zone-a", Name: phases.GreenGroupName("bg-a", u.ID)}}, p.Groups)
			require.ElementsMatch(t, bg.BlueGreen.Green[0].Nodes, names)
		}
	}
	for _, g := range []cloud.GroupRef{{Zone: "zone-a", Name: "surge-a"}, {Zone: "zone-b", Name: "surge-b"}} {
		insts, err := mem.ListInstances(ctxb, g)
		require.NoError(t, err)
		for _, in := range insts {
			require.Contains(t, live, in.Name, "only replacements are left in %s", g)
			require.NotEqual(t, baseTemplate, in.Template)
		}
	}
	_, err = mem.GetGroup(ctxb, cloud.GroupRef{Zone: "zone-a", Name: "bg-a"})
	require.ErrorIs(t, err, cloud.ErrNotFound, "the blue group is deleted")
	green, err := mem.GetGroup(ctxb, cloud.GroupRef{Zone: "zone-a", Name: phases.GreenGroupName("bg-a", u.ID)})
	require.NoError(t, err)
	require.Equal(t, cloud.Autoscaling{Min: 1, Max: 4}, green.Autoscaling, "green gets the pool's autoscaling range")

	// Zones one after another: zone-b's node started after zone-a's were done.
	var aDone, bStart time.Time
	for _, n := range u.PoolNodes(surge) {
		if n.Zone == "zone-a" && n.FinishedAt.After(aDone) {
			aDone = n.FinishedAt
		}
		if n.Zone == "zone-b" {
			bStart = n.StartedAt
		}
	}
	require.False(t, bStart.Before(aDone), "zone-b started %s, zone-a done %s", bStart, aDone)
	for _, n := range append(surgeNodes, blueNodes...) {
		require.True(t, ops.called("delete node "+n), "the Node of %s is deleted", n)
	}
	// Blue was frozen for the cluster autoscaler while schedulable and
	// stayed frozen until its Nodes were deleted.
	for _, n := range blueNodes {
		requireFrozenBeforeCordon(t, ops, n)
		require.False(t, ops.called("thaw blue "+n), "blue node %s thawed before its deletion", n)
	}
	// A surge node's drain is bounded by the hour of GKE's surge upgrades;
	// a blue node's and the bare-metal control plane's by 20 minutes.
	for _, n := range surgeNodes {
		o, ok := ops.drainOf(n)
		require.True(t, ok, "%s drained", n)
		require.True(t, o.Surge, "%s is drained as a surge node", n)
	}
	for _, n := range append([]string{"cp-1"}, blueNodes...) {
		o, ok := ops.drainOf(n)
		require.True(t, ok, "%s drained", n)
		require.False(t, o.Surge, "%s is not drained as a surge node", n)
	}
}

// callIndex is the index of the first call, -1 when there is none.
func callIndex(calls []string, call string) int { return slices.Index(calls, call) }

// requireFrozenBeforeCordon: blue node was given its cluster-autoscaler
// marks (FreezeBlueNode) before it was cordoned, so that the autoscaler's
// template of blue's node group, copied from a schedulable node, has the
// taint.
func requireFrozenBeforeCordon(t *testing.T, ops *fakeOps, node string) {
	t.Helper()
	calls := ops.Calls()
	frozen := callIndex(calls, "freeze blue "+node)
	require.GreaterOrEqual(t, frozen, 0, "blue node %s frozen", node)
	if cordoned := callIndex(calls, "cordon "+node); cordoned >= 0 {
		require.Less(t, frozen, cordoned, "blue node %s frozen before its cordon", node)
	}
}

// startMIG registers cloudy with the pools, runs agents for its
// bare-metal nodes and starts an upgrade to 1.34.4 once every node's agent
// reports; it returns the registered spec. The caller runs the MIG pools'
// machines (startFleet), before, so that holds are set in time.
func startMIG(ctx context.Context, t *testing.T, tc *testCluster, pools ...api.Pool) api.ClusterSpec {
	cl := tc.anyClient(0)
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	put(t, cl, "/v1/clusters/cloudy", migSpec(pools...))
	reg := getCluster(t, cl, "cloudy").Spec
	runAgents(ctx, tc, "cloudy", bareMetalNodes(reg))
	waitAgents(t, tc, "cloudy", len(nodeNames(reg)))
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/cloudy/upgrade", api.UpgradeRequest{Version: "1.34.4", ConcurrentWorkerPools: 2}, nil)
	require.NoError(t, err)
	return reg
}

// waitUpgrade polls the upgrade until cond holds.
func waitUpgrade(ctx context.Context, t *testing.T, tc *testCluster, what string, cond func(u *phases.Upgrade) bool) *phases.Upgrade {
	t.Helper()
	var u *phases.Upgrade
	eventually(t, what, func() bool {
		got, err := getUpgrade(ctx, tc.anyClient(0), "cloudy")
		if err != nil || got == nil || !cond(got) {
			return false
		}
		u = got
		return true
	})
	return u
}

// poolCommand posts a pool command and returns its status and problem rule.
func poolCommand(t *testing.T, tc *testCluster, pool, cmd string) (int, string) {
	code, prob, _ := raw(t, tc.waitLeader(), "POST", "/v1/clusters/cloudy/pools/"+pool+"/upgrade:"+cmd, "application/json", []byte(`{}`))
	if prob == nil {
		return code, ""
	}
	return code, prob.Rule
}

// TestMIGSurgeWaitsForCapacityThenRollsBack: a surge node waits (not fails)
// while its zone has no capacity, with the reason in its status and no
// stray instance; once replaced it is rolled back on an operator's
// command: replaced again from the old release, the pool rolled back, the
// upgrade cancelled and no longer blocking.
func TestMIGSurgeWaitsForCapacityThenRollsBack(t *testing.T) {
	g := cloud.GroupRef{Zone: "zone-a", Name: "surge-a"}
	mem := newMIGCloud(t, cloud.Group{GroupRef: g, TargetSize: 2})
	mem.SetStockout("zone-a", true)
	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops, withCloud(mem))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	initial, err := mem.ListInstances(ctx, g)
	require.NoError(t, err)
	first, second := initial[0].Name, initial[1].Name
	release := ops.holdCordon(first)
	startFleet(ctx, tc, "cloudy", mem, "1.33.6")
	startMIG(ctx, t, tc, api.Pool{Name: "surge", Role: api.RoleWorker, Backing: api.BackingMIG, Groups: []api.InstanceGroup{{Zone: g.Zone, Name: g.Name}}})

	u := waitUpgrade(ctx, t, tc, "the surge node waiting for capacity", func(u *phases.Upgrade) bool {
		n, _ := u.Node(first)
		return strings.HasPrefix(n.Waiting, "stockout") && n.State == phases.StateRunning
	})
	n, _ := u.Node(first)
	require.Zero(t, n.Attempt, "a wait is not a failure")
	insts, err := mem.ListInstances(ctx, g)
	require.NoError(t, err)
	require.Len(t, insts, 2, "the replacement the zone could not run was deleted")

	mem.SetStockout("zone-a", false)
	waitUpgrade(ctx, t, tc, "the first node at its cordon", func(u *phases.Upgrade) bool {
		n, _ := u.Node(first)
		p, _ := u.Pool("surge")
		step, ok := u.CurrentStep(n)
		return ok && step.Kind == phases.NodeCordon && n.Waiting == "" && len(p.Groups) == 1
	})
	code, rule := poolCommand(t, tc, "surge", "complete")
	require.Equal(t, 409, code)
	require.Equal(t, "complete-blue-green-only", rule)
	code, rule = poolCommand(t, tc, "surge", "rollback")
	require.Equal(t, 200, code, rule)
	release()

	u = waitUpgrade(ctx, t, tc, "the upgrade cancelled after the rollback", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeCancelled })
	st, _ := u.Step("pool/surge")
	require.Equal(t, phases.StateRolledBack, st.State)
	n, _ = u.Node(first)
	require.True(t, n.Rollback)
	require.Equal(t, "1.33.6", n.Version.String())
	require.Equal(t, phases.ReplacementName(g.Name, u.ID+"/rollback", first), n.Current, "replaced again, from the old release")
	m, _ := u.Node(second)
	require.Equal(t, phases.StatePending, m.State, "a node the upgrade did not touch stays as it was")
	insts, err = mem.ListInstances(ctx, g)
	require.NoError(t, err)
	var names []string
	for _, in := range insts {
		names = append(names, in.Name)
	}
	require.ElementsMatch(t, []string{second, n.Current}, names)
	forward := phases.ReplacementName(g.Name, u.ID, first)
	deleted := deletes(mem)
	for name, k := range creates(mem) {
		if !strings.Contains(name, forward) {
			require.Equal(t, 1, k, "%s created %d times", name, k)
			continue
		}
		// One create per try: each try the zone could not run was
		// deleted and made again after the wait (how many tries fell in
		// the stockout depends on the retry interval), and the last was
		// deleted by the rollback. None was left behind.
		require.GreaterOrEqual(t, k, 2, "%s created %d times: it waited at least once", name, k)
		require.Equal(t, k, deleted[name], "%s: every create was deleted again", name)
	}
	c := getCluster(t, tc.anyClient(0), "cloudy")
	require.Equal(t, "1.33.6", c.Status.Version)
	require.Equal(t, map[string]int{"1.34.4": 1, "1.33.6": 2}, c.Status.Versions, "the control plane was upgraded; the rolled-back pool runs the old version")
	_, err = tc.anyClient(0).Do(ctx, http.MethodPost, "/v1/clusters/cloudy/upgrade", api.UpgradeRequest{Version: "1.34.4", DryRun: true}, nil)
	require.NoError(t, err, "a cancelled upgrade does not block the next")
}

// TestMIGBlueGreenRollbackDuringSoak: complete is refused before the soak;
// a rollback during the soak deletes green, restores blue's autoscaling
// and uncordons it; the pool is as it was.
func TestMIGBlueGreenRollbackDuringSoak(t *testing.T) {
	g := cloud.GroupRef{Zone: "zone-a", Name: "bg-a"}
	mem := newMIGCloud(t, cloud.Group{GroupRef: g, TargetSize: 2})
	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops, withCloud(mem))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blue, err := mem.ListInstances(ctx, g)
	require.NoError(t, err)
	release := ops.holdCordon(blue[0].Name)
	startFleet(ctx, tc, "cloudy", mem, "1.33.6")
	reg := startMIG(ctx, t, tc, api.Pool{Name: "bg", Role: api.RoleWorker, Backing: api.BackingMIG, Groups: []api.InstanceGroup{{Zone: g.Zone, Name: g.Name}},
		Autoscaling: &api.Autoscaling{MinNodes: 1, MaxNodes: 5},
		Settings:    api.UpgradeSettings{Strategy: phases.StrategyBlueGreen, BlueGreenSettings: &api.BlueGreenSettings{NodePoolSoakDuration: "3600s"}}})
	u := waitUpgrade(ctx, t, tc, "blue cordoning", func(u *phases.Upgrade) bool {
		p, _ := u.Pool("bg")
		return p.BlueGreen.Phase == phases.PhaseCordoningBlue
	})
	p, _ := u.Pool("bg")
	green := p.BlueGreen.Green[0]
	pinned, err := mem.GetGroup(ctx, g)
	require.NoError(t, err)
	require.Equal(t, cloud.Autoscaling{Min: 2, Max: 2}, pinned.Autoscaling, "blue is pinned to its size")
	for _, in := range blue {
		requireFrozenBeforeCordon(t, ops, in.Name)
		require.False(t, ops.called("thaw blue "+in.Name))
	}
	code, rule := poolCommand(t, tc, "bg", "complete")
	require.Equal(t, 409, code)
	require.Equal(t, "complete-outside-soak", rule)
	release()
	waitUpgrade(ctx, t, tc, "the soak", func(u *phases.Upgrade) bool {
		p, _ := u.Pool("bg")
		return p.BlueGreen.Phase == phases.PhaseSoaking
	})
	code, rule = poolCommand(t, tc, "bg", "rollback")
	require.Equal(t, 200, code, rule)
	u = waitUpgrade(ctx, t, tc, "rolled back", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeCancelled })
	p, _ = u.Pool("bg")
	require.Equal(t, phases.PhaseRolledBack, p.BlueGreen.Phase)
	require.Equal(t, phases.PhaseSoaking, p.BlueGreen.RollbackFrom)
	_, err = mem.GetGroup(ctx, cloud.GroupRef{Zone: g.Zone, Name: green.Name})
	require.ErrorIs(t, err, cloud.ErrNotFound, "green is deleted")
	restored, err := mem.GetGroup(ctx, g)
	require.NoError(t, err)
	require.Equal(t, cloud.Autoscaling{Min: 1, Max: 5}, restored.Autoscaling)
	for _, in := range blue {
		require.True(t, ops.called("uncordon "+in.Name), "blue node %s uncordoned", in.Name)
		// The blue pool may be scaled again: the cluster autoscaler's
		// marks are off.
		require.Greater(t, callIndex(ops.Calls(), "thaw blue "+in.Name), callIndex(ops.Calls(), "freeze blue "+in.Name),
			"blue node %s thawed after its freeze", in.Name)
	}
	for _, n := range green.Nodes {
		require.True(t, ops.called("delete node "+n), "green node %s deleted", n)
	}
	c := getCluster(t, tc.anyClient(0), "cloudy")
	require.Equal(t, reg.Pools, c.Spec.Pools, "the pool is as it was registered")
	require.True(t, slices.ContainsFunc(c.Spec.Pools, func(p api.Pool) bool { return p.Name == "bg" }))
}

// TestMIGBlueGreenCompletesOnlyWithGreenAgents: a green instance counts as
// upgraded only once molt can manage it. Its Node is Ready, but its agent
// is held back from enrolling: the pool does not complete. Deleting blue
// waits for the agent, fails its attempt when WaitReadyTimeout passes,
// naming the agent, and keeps blue. Once the agent enrolls, a later
// attempt deletes blue and the upgrade completes, with the green node's
// agent registered and healthy at the release — what the next upgrade's
// preflight asks of every node.
func TestMIGBlueGreenCompletesOnlyWithGreenAgents(t *testing.T) {
	g := cloud.GroupRef{Zone: "zone-a", Name: "bg-a"}
	mem := newMIGCloud(t, cloud.Group{GroupRef: g, TargetSize: 1})
	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops, withCloud(mem), func(cfg *coordinator.Config) { cfg.WaitReadyTimeout = time.Second })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The green group's name follows from the upgrade's ID (the cluster's
	// first to 1.34.4), its instance's from the memory cloud's naming.
	id := phases.UpgradeID("cloudy", phases.MustParseVersion("1.34.4"), 1)
	greenNode := phases.GreenGroupName(g.Name, id) + "-0001"
	f := startFleet(ctx, tc, "cloudy", mem, "1.33.6")
	enroll := f.hold(greenNode)
	defer enroll()
	startMIG(ctx, t, tc, api.Pool{Name: "bg", Role: api.RoleWorker, Backing: api.BackingMIG, Groups: []api.InstanceGroup{{Zone: g.Zone, Name: g.Name}},
		Settings: api.UpgradeSettings{Strategy: phases.StrategyBlueGreen, BlueGreenSettings: &api.BlueGreenSettings{NodePoolSoakDuration: "1s"}}})

	// Without the rule the pool would complete here: the second half of
	// the condition makes that fail at once rather than at the deadline.
	u := waitUpgrade(ctx, t, tc, "deleting blue failed an attempt, or the upgrade done", func(u *phases.Upgrade) bool {
		p, _ := u.Pool("bg")
		return u.State == phases.UpgradeDone || p.BlueGreen != nil && p.BlueGreen.Phase == phases.PhaseDeletingBlue && p.BlueGreen.Attempt > 0
	})
	require.NotEqual(t, phases.UpgradeDone, u.State, "the upgrade completed while a green node's agent had not enrolled")
	p, _ := u.Pool("bg")
	require.Contains(t, p.BlueGreen.Message, "green node "+greenNode+": node "+greenNode+" is Ready at v1.34.4 but not manageable")
	require.Contains(t, p.BlueGreen.Message, "agent of "+greenNode+" not registered")
	require.True(t, ops.called("ready "+greenNode+" v1.34.4"), "green's Node was Ready")
	_, err := mem.GetGroup(ctx, g)
	require.NoError(t, err, "blue is kept while green cannot be managed")

	enroll()
	u = waitUpgrade(ctx, t, tc, "upgrade done", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeDone })
	p, _ = u.Pool("bg")
	require.Equal(t, phases.PhaseCompleted, p.BlueGreen.Phase)
	_, err = mem.GetGroup(ctx, g)
	require.ErrorIs(t, err, cloud.ErrNotFound, "blue is deleted")
	var agent *api.AgentStatus
	for _, a := range getCluster(t, tc.anyClient(0), "cloudy").Status.Agents {
		if a.Node == greenNode {
			agent = &a
		}
	}
	require.NotNil(t, agent, "the green node's agent is known")
	require.True(t, agent.Registered && agent.Healthy && !agent.Missing, "%+v", *agent)
	require.Equal(t, "v1.34.4", agent.Kubelet)
}
