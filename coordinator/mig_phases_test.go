package coordinator_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/memory"
	"github.com/moltproject/molt/phases"
)

// TestMIGBlueGreenLeaderKilledInEveryPhase kills the Raft leader in each
// blue/green phase — while green is being created (its groups made, its
// Nodes awaited), while blue is cordoned, while a batch drains, while the
// pool soaks, while blue is deleted (its groups gone, its Nodes being
// deleted) and while a rollback deletes green — each time after the
// phase's cloud calls were made and before their outcome was committed.
// Every new leader repeats the phase's work with the same request IDs:
// the provider creates no group or instance twice and deletes none twice
// (each such request is carried out once; the repeats are recognised),
// and both pools end where they should: one completed, one rolled back.
func TestMIGBlueGreenLeaderKilledInEveryPhase(t *testing.T) {
	mem := newMIGCloud(t,
		cloud.Group{GroupRef: cloud.GroupRef{Zone: "zone-a", Name: "bg-a"}, TargetSize: 2},
		cloud.Group{GroupRef: cloud.GroupRef{Zone: "zone-b", Name: "bg-b"}, TargetSize: 1},
		cloud.Group{GroupRef: cloud.GroupRef{Zone: "zone-a", Name: "rb-a"}, TargetSize: 1})
	ops := newFakeOps()
	tc := newTestCluster(t, 3, ops, withCloud(mem))
	cl := tc.anyClient(0)
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	one := 1
	blueGreen := func(soak string) api.UpgradeSettings {
		return api.UpgradeSettings{Strategy: phases.StrategyBlueGreen, BlueGreenSettings: &api.BlueGreenSettings{
			StandardRolloutPolicy: &api.StandardRolloutPolicy{BatchNodeCount: &one}, NodePoolSoakDuration: soak}}
	}
	put(t, cl, "/v1/clusters/cloudy", migSpec(
		api.Pool{Name: "bg", Role: api.RoleWorker, Backing: api.BackingMIG, Settings: blueGreen("3600s"),
			Groups:      []api.InstanceGroup{{Zone: "zone-a", Name: "bg-a"}, {Zone: "zone-b", Name: "bg-b"}},
			Autoscaling: &api.Autoscaling{MinNodes: 1, MaxNodes: 3}},
		api.Pool{Name: "rb", Role: api.RoleWorker, Backing: api.BackingMIG, Settings: blueGreen("3600s"),
			Groups:      []api.InstanceGroup{{Zone: "zone-a", Name: "rb-a"}},
			Autoscaling: &api.Autoscaling{MinNodes: 1, MaxNodes: 2}},
	))
	reg := getCluster(t, cl, "cloudy").Spec
	blue := map[string]string{} // group → its first instance
	for _, g := range []cloud.GroupRef{{Zone: "zone-a", Name: "bg-a"}, {Zone: "zone-a", Name: "rb-a"}} {
		ins, err := mem.ListInstances(context.Background(), g)
		require.NoError(t, err)
		blue[g.Name] = ins[0].Name
	}

	// The upgrade's ID is the cluster's first to 1.34.4: the names of
	// green groups follow from it, so the holds can be set before it runs.
	id := phases.UpgradeID("cloudy", phases.MustParseVersion("1.34.4"), 1)
	greenA, greenRB := phases.GreenGroupName("bg-a", id), phases.GreenGroupName("rb-a", id)
	createdGreen, releaseGreen := ops.holdCall("ready " + greenA)
	releaseCordon := sync.OnceFunc(ops.holdCordon(blue["bg-a"]))
	drained, releaseDrain := ops.holdCall("drain " + blue["bg-a"])
	rbDrained, releaseRBDrain := ops.holdCall("drain " + blue["rb-a"])
	blueDeleted, releaseBlueDelete := ops.holdCall("delete node " + blue["bg-a"])
	greenDeleted, releaseGreenDelete := ops.holdCall("delete node " + greenRB)
	for _, r := range []func(){releaseGreen, releaseCordon, releaseDrain, releaseRBDrain, releaseBlueDelete, releaseGreenDelete} {
		defer r()
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runAgents(ctx, tc, "cloudy", bareMetalNodes(reg))
	startFleet(ctx, tc, "cloudy", mem, "1.33.6")
	waitAgents(t, tc, "cloudy", len(nodeNames(reg)))
	var started api.Upgrade
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/cloudy/upgrade", api.UpgradeRequest{Version: "1.34.4", ConcurrentWorkerPools: 2}, &started)
	require.NoError(t, err)
	require.Equal(t, id, started.ID)

	phaseOf := func(u *phases.Upgrade, pool string) phases.BlueGreenPhase {
		p, _ := u.Pool(pool)
		if p.BlueGreen == nil {
			return ""
		}
		return p.BlueGreen.Phase
	}
	// killIn waits for the call the phase is held at, checks the pool is
	// in the phase, kills the leader and brings it back from its disk.
	killIn := func(pool string, phase phases.BlueGreenPhase, held <-chan struct{}) {
		t.Helper()
		if held != nil {
			select {
			case <-held:
			case <-time.After(30 * time.Second):
				t.Fatalf("pool %s never reached the call it is held at in %s", pool, phase)
			}
		}
		u := waitUpgrade(ctx, t, tc, fmt.Sprintf("pool %s in %s", pool, phase), func(u *phases.Upgrade) bool { return phaseOf(u, pool) == phase })
		require.Equal(t, phase, phaseOf(u, pool))
		old := tc.waitLeader()
		raftAddr := old.c.Store().RaftAddr()
		old.stop(true)
		require.NotEqual(t, old.id, tc.waitLeader().id)
		t.Logf("leader %s killed with pool %s in %s", old.id, pool, phase)
		back := startMemberAt(t, old.id, old.dir, false, ops, old.addr, raftAddr, nil, withCloud(mem))
		var ms []*member
		for _, m := range tc.list() {
			if m != old {
				ms = append(ms, m)
			}
		}
		tc.replace(append(ms, back))
	}

	// Green's groups are made; the new leader waits for green's Nodes.
	killIn("bg", phases.PhaseCreatingGreen, createdGreen)
	releaseGreen()
	// Blue's first node is being cordoned.
	waitUpgrade(ctx, t, tc, "bg-a's first node cordoning", func(u *phases.Upgrade) bool {
		return phaseOf(u, "bg") == phases.PhaseCordoningBlue && ops.called("cordon "+blue["bg-a"])
	})
	killIn("bg", phases.PhaseCordoningBlue, nil)
	releaseCordon()
	// The first batch drains.
	killIn("bg", phases.PhaseDrainingBlue, drained)
	releaseDrain()
	// The other pool rolls back from its drain; its green groups are
	// deleted and their Nodes are being deleted.
	<-rbDrained
	waitUpgrade(ctx, t, tc, "rb draining", func(u *phases.Upgrade) bool { return phaseOf(u, "rb") == phases.PhaseDrainingBlue })
	code, rule := poolCommand(t, tc, "rb", "rollback")
	require.Equal(t, 200, code, rule)
	killIn("rb", phases.PhaseRollbackStarted, greenDeleted)
	releaseGreenDelete()
	releaseRBDrain()
	// The pool soaks (an hour); complete ends it after the kill.
	killIn("bg", phases.PhaseSoaking, nil)
	code, rule = poolCommand(t, tc, "bg", "complete")
	require.Equal(t, 200, code, rule)
	// Blue's groups are deleted; its Nodes are being deleted.
	killIn("bg", phases.PhaseDeletingBlue, blueDeleted)
	releaseBlueDelete()

	u := waitUpgrade(ctx, t, tc, "the upgrade ended (cancelled: rb rolled back)", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeCancelled })
	require.Equal(t, phases.PhaseCompleted, phaseOf(u, "bg"))
	require.Equal(t, phases.PhaseRolledBack, phaseOf(u, "rb"))
	rb, _ := u.Pool("rb")
	require.Equal(t, phases.PhaseDrainingBlue, rb.BlueGreen.RollbackFrom)

	// Each change the provider carried out, it carried out once; the new
	// leaders' repeats were recognised as the same requests.
	changes := map[string]int{}
	for _, c := range mem.Calls() {
		switch c.Method {
		case "CreateGroup", "DeleteGroup", "CreateInstances", "DeleteInstances", "RecreateInstances":
			if !c.Repeat && c.Err == nil && c.Req != "" && !isSetup(c) {
				changes[c.Method+" "+c.Group.String()+" "+c.Args]++
			}
		}
	}
	for change, n := range changes {
		require.Equal(t, 1, n, "%s carried out %d times", change, n)
	}
	require.Equal(t, map[string]int{
		"CreateGroup zone-a/" + greenA + " template=" + templateOf(t, mem, "1.34.4") + " size=2":                            1,
		"CreateGroup zone-b/" + phases.GreenGroupName("bg-b", id) + " template=" + templateOf(t, mem, "1.34.4") + " size=1": 1,
		"CreateGroup zone-a/" + greenRB + " template=" + templateOf(t, mem, "1.34.4") + " size=1":                           1,
		"DeleteGroup zone-a/bg-a ":            1,
		"DeleteGroup zone-b/bg-b ":            1,
		"DeleteGroup zone-a/" + greenRB + " ": 1,
	}, changes, "the changes blue/green makes, each once")
	require.Positive(t, mem.Repeats("CreateGroup"), "a new leader repeated green's creation, which changed nothing")
	require.GreaterOrEqual(t, mem.Repeats("DeleteGroup"), 2, "new leaders repeated the deletes of blue and of rb's green")

	final := getCluster(t, tc.anyClient(0), "cloudy")
	for _, p := range final.Spec.Pools {
		switch p.Name {
		case "bg":
			require.Equal(t, []api.InstanceGroup{{Zone: "zone-a", Name: greenA}, {Zone: "zone-b", Name: phases.GreenGroupName("bg-b", id)}}, p.Groups)
		case "rb":
			require.Equal(t, []api.InstanceGroup{{Zone: "zone-a", Name: "rb-a"}}, p.Groups)
		}
	}
	restored, err := mem.GetGroup(ctx, cloud.GroupRef{Zone: "zone-a", Name: "rb-a"})
	require.NoError(t, err)
	require.Equal(t, cloud.Autoscaling{Min: 1, Max: 2}, restored.Autoscaling, "rb's blue group has its range back")
	require.True(t, ops.called("uncordon "+blue["rb-a"]))
	// rb's blue may be scaled again, bg's stayed frozen until deleted.
	require.True(t, ops.called("thaw blue "+blue["rb-a"]), "the rolled-back pool's blue node is thawed")
	requireFrozenBeforeCordon(t, ops, blue["bg-a"])
	require.False(t, ops.called("thaw blue "+blue["bg-a"]), "the completed pool's blue node stays frozen until deleted")
	_, err = mem.GetGroup(ctx, cloud.GroupRef{Zone: "zone-a", Name: greenRB})
	require.ErrorIs(t, err, cloud.ErrNotFound)
}

// isSetup tells newMIGCloud's own calls apart.
func isSetup(c memory.Call) bool { return len(c.Req) > 6 && c.Req[:6] == "setup/" }

// templateOf is the name the memory cloud gave release's template.
func templateOf(t *testing.T, mem *memory.Cloud, release string) string {
	for _, c := range mem.Calls() {
		if c.Method == "EnsureTemplate" && c.Err == nil && c.Args == "release="+release+" base="+baseTemplate {
			return cloud.TemplateName(cloud.TemplateSpec{Release: release, Base: baseTemplate})
		}
	}
	t.Fatalf("no template of %s was made", release)
	return ""
}

// cloudHolds holds callers of the memory cloud right after a change it
// carried out, until released or until their context ends (their leader
// killed): the moment after a cloud call and before its outcome is
// committed.
type cloudHolds struct {
	mu    sync.Mutex
	holds []*cloudHold
}

type cloudHold struct {
	method, args string
	hit          chan struct{}
	hitOnce      sync.Once
	released     chan struct{}
}

func newCloudHolds(mem *memory.Cloud) *cloudHolds {
	h := &cloudHolds{}
	mem.AfterCall(h.after)
	return h
}

// hold holds every successful call of method with these arguments.
func (h *cloudHolds) hold(method, args string) (hit <-chan struct{}, release func()) {
	c := &cloudHold{method: method, args: args, hit: make(chan struct{}), released: make(chan struct{})}
	h.mu.Lock()
	h.holds = append(h.holds, c)
	h.mu.Unlock()
	return c.hit, sync.OnceFunc(func() { close(c.released) })
}

func (h *cloudHolds) after(ctx context.Context, call memory.Call) {
	h.mu.Lock()
	holds := append([]*cloudHold(nil), h.holds...)
	h.mu.Unlock()
	for _, c := range holds {
		if call.Method != c.method || call.Args != c.args || call.Err != nil {
			continue
		}
		c.hitOnce.Do(func() { close(c.hit) })
		select {
		case <-c.released:
		case <-ctx.Done():
		}
	}
}

// TestMIGSurgeLeaderKilledInEveryStep kills the Raft leader in each step
// of both surge paths, each time after the step's cloud or cluster call
// was made and before its outcome was committed: the surge path (create
// the replacement, wait for it, cordon, drain, delete the old instance)
// and the unavailable path (recreate in place, wait Ready, uncordon). The
// new leaders repeat the steps under the same request IDs: every
// instance is created, deleted or recreated once, and the upgrade ends
// done with every node replaced or recreated.
func TestMIGSurgeLeaderKilledInEveryStep(t *testing.T) {
	mem := newMIGCloud(t,
		cloud.Group{GroupRef: cloud.GroupRef{Zone: "zone-a", Name: "s-a"}, TargetSize: 1},
		cloud.Group{GroupRef: cloud.GroupRef{Zone: "zone-b", Name: "s-b"}, TargetSize: 1},
		cloud.Group{GroupRef: cloud.GroupRef{Zone: "zone-a", Name: "u-a"}, TargetSize: 1})
	holds := newCloudHolds(mem)
	ops := newFakeOps()
	tc := newTestCluster(t, 3, ops, withCloud(mem))
	cl := tc.anyClient(0)
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	zero, one := 0, 1
	put(t, cl, "/v1/clusters/cloudy", migSpec(
		api.Pool{Name: "s", Role: api.RoleWorker, Backing: api.BackingMIG, Settings: api.UpgradeSettings{MaxSurge: &one},
			Groups: []api.InstanceGroup{{Zone: "zone-a", Name: "s-a"}, {Zone: "zone-b", Name: "s-b"}}},
		api.Pool{Name: "u", Role: api.RoleWorker, Backing: api.BackingMIG, Settings: api.UpgradeSettings{MaxSurge: &zero, MaxUnavailable: &one},
			Groups: []api.InstanceGroup{{Zone: "zone-a", Name: "u-a"}}},
	))
	reg := getCluster(t, cl, "cloudy").Spec
	first := func(g string) string {
		ins, err := mem.ListInstances(context.Background(), cloud.GroupRef{Zone: map[string]string{"s-a": "zone-a", "s-b": "zone-b", "u-a": "zone-a"}[g], Name: g})
		require.NoError(t, err)
		return ins[0].Name
	}
	old, oldB, inPlace := first("s-a"), first("s-b"), first("u-a")
	id := phases.UpgradeID("cloudy", phases.MustParseVersion("1.34.4"), 1)
	repl := phases.ReplacementName("s-a", id, old)

	created, releaseCreated := holds.hold("CreateInstances", fmt.Sprintf("names=%v", []string{repl}))
	waited, releaseWaited := ops.holdCall("ready " + repl)
	releaseCordon := sync.OnceFunc(ops.holdCordon(old))
	drained, releaseDrained := ops.holdCall("drain " + old)
	deleted, releaseDeleted := ops.holdCall("delete node " + old)
	recreated, releaseRecreated := holds.hold("RecreateInstances", fmt.Sprintf("names=%v", []string{inPlace}))
	ready, releaseReady := ops.holdCall("ready " + inPlace)
	uncordoned, releaseUncordoned := ops.holdCall("uncordon " + inPlace)
	for _, r := range []func(){releaseCreated, releaseWaited, releaseCordon, releaseDrained, releaseDeleted, releaseRecreated, releaseReady, releaseUncordoned} {
		defer r()
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runAgents(ctx, tc, "cloudy", bareMetalNodes(reg))
	startFleet(ctx, tc, "cloudy", mem, "1.33.6")
	waitAgents(t, tc, "cloudy", len(nodeNames(reg)))
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/cloudy/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)

	// Worker pools one after another (s, then u): a kill in one pool's
	// step does not disturb the other's. killAt waits for the held call,
	// checks node is at the step, kills the leader and brings it back
	// from its disk.
	killAt := func(node string, kind phases.NodeStepKind, held <-chan struct{}) {
		t.Helper()
		if held != nil {
			select {
			case <-held:
			case <-time.After(30 * time.Second):
				t.Fatalf("%s never reached the call held in %s", node, kind)
			}
		}
		waitUpgrade(ctx, t, tc, fmt.Sprintf("%s at %s", node, kind), func(u *phases.Upgrade) bool {
			n, ok := u.Node(node)
			if !ok || n.State != phases.StateRunning {
				return false
			}
			st, ok := u.CurrentStep(n)
			return ok && st.Kind == kind
		})
		oldLeader := tc.waitLeader()
		raftAddr := oldLeader.c.Store().RaftAddr()
		oldLeader.stop(true)
		require.NotEqual(t, oldLeader.id, tc.waitLeader().id)
		t.Logf("leader %s killed with %s at %s", oldLeader.id, node, kind)
		back := startMemberAt(t, oldLeader.id, oldLeader.dir, false, ops, oldLeader.addr, raftAddr, nil, withCloud(mem))
		var ms []*member
		for _, m := range tc.list() {
			if m != oldLeader {
				ms = append(ms, m)
			}
		}
		tc.replace(append(ms, back))
	}
	killAt(old, phases.NodeCreateReplacement, created)
	releaseCreated()
	killAt(old, phases.NodeWaitReplacement, waited)
	releaseWaited()
	waitUpgrade(ctx, t, tc, old+" cordoning", func(*phases.Upgrade) bool { return ops.called("cordon " + old) })
	killAt(old, phases.NodeCordon, nil)
	releaseCordon()
	killAt(old, phases.NodeDrain, drained)
	releaseDrained()
	killAt(old, phases.NodeDeleteInstance, deleted)
	releaseDeleted()
	killAt(inPlace, phases.NodeRecreateInstance, recreated)
	releaseRecreated()
	killAt(inPlace, phases.NodeWaitReady, ready)
	releaseReady()
	killAt(inPlace, phases.NodeUncordon, uncordoned)
	releaseUncordoned()

	u := waitUpgrade(ctx, t, tc, "upgrade done", func(u *phases.Upgrade) bool { return u.State == phases.UpgradeDone })
	changes := map[string]int{}
	for _, c := range mem.Calls() {
		switch c.Method {
		case "CreateGroup", "DeleteGroup", "CreateInstances", "DeleteInstances", "RecreateInstances":
			if !c.Repeat && c.Err == nil && !isSetup(c) {
				changes[c.Method+" "+c.Group.String()+" "+c.Args]++
			}
		}
	}
	replB := phases.ReplacementName("s-b", id, oldB)
	require.Equal(t, map[string]int{
		"CreateInstances zone-a/s-a names=[" + repl + "]":      1,
		"DeleteInstances zone-a/s-a names=[" + old + "]":       1,
		"CreateInstances zone-b/s-b names=[" + replB + "]":     1,
		"DeleteInstances zone-b/s-b names=[" + oldB + "]":      1,
		"RecreateInstances zone-a/u-a names=[" + inPlace + "]": 1,
	}, changes, "each instance created, deleted or recreated once")
	require.Positive(t, mem.Repeats("CreateInstances"), "a new leader repeated the replacement's creation, which changed nothing")
	require.Positive(t, mem.Repeats("DeleteInstances"), "a new leader repeated the old instance's deletion, which changed nothing")
	n, _ := u.Node(inPlace)
	require.Equal(t, inPlace, n.Live(), "recreated in place")
	require.Equal(t, phases.MustParseVersion("1.34.4"), n.Version)
}
