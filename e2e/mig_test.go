//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/lab"
	"github.com/moltproject/molt/phases"
)

// The MIG pool's part of the end-to-end run (e2e_test.go): the lab's
// instance groups, 2 zones × 1 instance, registered as pool "mig" beside
// the bare-metal pools. The minor upgrade replaces its instances by surge
// (maxSurge 1); the patch runs blue/green twice: the first time rolled
// back while blue drains, the second completed during the soak.

// blueGreenSettings are the patch's: one node per batch, a short batch
// soak, and a pool soak of an hour that only complete can cut short.
func blueGreenSettings() api.UpgradeSettings {
	one := 1
	return api.UpgradeSettings{Strategy: phases.StrategyBlueGreen, BlueGreenSettings: &api.BlueGreenSettings{
		StandardRolloutPolicy: &api.StandardRolloutPolicy{BatchNodeCount: &one, BatchSoakDuration: "2s"},
		NodePoolSoakDuration:  "3600s"}}
}

// surgeWatch samples the MIG pool's groups while an upgrade runs: how many
// instances each zone holds (not counting those being deleted).
type surgeWatch struct {
	env    *Env
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	min, max map[string]int // zone → instances
	samples  int
	before   []string
}

func watchMIG(t *testing.T, ctx context.Context, env *Env) *surgeWatch {
	t.Helper()
	t.Cleanup(func() { dumpMIG(t, env) })
	before, err := env.PoolNodes(ctx, env.MIG().Name)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(ctx)
	w := &surgeWatch{env: env, cancel: cancel, done: make(chan struct{}), min: map[string]int{}, max: map[string]int{}, before: before}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			w.sample(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *surgeWatch) sample(ctx context.Context) {
	c, err := w.env.Cluster(ctx)
	if err != nil {
		return
	}
	g := w.env.GroupService().Groups()
	for _, p := range c.Spec.Pools {
		if p.Name != w.env.MIG().Name {
			continue
		}
		for _, grp := range p.Groups {
			ins, err := g.ListInstances(ctx, cloud.GroupRef{Zone: grp.Zone, Name: grp.Name})
			if err != nil {
				continue
			}
			n := 0
			for _, in := range ins {
				if in.Status != cloud.StatusDeleting {
					n++
				}
			}
			w.mu.Lock()
			if m, ok := w.min[grp.Zone]; !ok || n < m {
				w.min[grp.Zone] = n
			}
			w.max[grp.Zone] = max(w.max[grp.Zone], n)
			w.samples++
			w.mu.Unlock()
		}
	}
}

// requireSurge checks what the surge upgrade u did to the MIG pool: every
// instance replaced by the one its deterministic name says, zone after
// zone, each zone's size within [size, size+maxSurge] at every sample; the
// replacements are the pool's nodes, Ready at the target with their
// provider IDs and zone labels, running the release's containerd, their
// agents enrolled; the hosts they replaced are gone, Nodes with them.
func (w *surgeWatch) requireSurge(t *testing.T, ctx context.Context, u *phases.Upgrade, version string) {
	t.Helper()
	w.cancel()
	<-w.done
	env, m := w.env, w.env.MIG()
	p, ok := u.Pool(m.Name)
	require.True(t, ok)
	require.Equal(t, phases.StrategySurge, p.Strategy)
	s, _ := u.Step(phases.PoolStepID(m.Name))
	require.Equal(t, phases.StateDone, s.State)
	lb, _ := u.Step(phases.PoolStepID("lb"))
	require.False(t, s.StartedAt.Before(lb.FinishedAt), "the MIG pool started after the LB pool")
	w.mu.Lock()
	t.Logf("MEASURED MIG pool size per zone during the surge (%d samples): min %v, max %v", w.samples, w.min, w.max)
	for _, z := range m.Zones {
		require.GreaterOrEqual(t, w.min[z], m.Size, "zone %s went below its size", z)
		require.LessOrEqual(t, w.max[z], m.Size+1, "zone %s went above size + maxSurge", z)
		require.Equal(t, m.Size+1, w.max[z], "zone %s surged", z)
	}
	w.mu.Unlock()

	nodes := u.PoolNodes(p)
	var live []string
	var zoneDone = map[string]time.Time{}
	for _, n := range nodes {
		require.Equal(t, phases.StateDone, n.State, n.Node)
		require.Equal(t, phases.ReplacementName(p.GroupOf(&n), u.ID, n.Node), n.Live(), "%s's replacement has its deterministic name", n.Node)
		live = append(live, n.Live())
		zoneDone[n.Zone] = maxTime(zoneDone[n.Zone], n.FinishedAt)
	}
	for i, z := range m.Zones[1:] {
		for _, n := range nodes {
			if n.Zone == z {
				require.False(t, n.StartedAt.Before(zoneDone[m.Zones[i]]), "zone %s started before zone %s was done", z, m.Zones[i])
			}
		}
	}
	got, err := env.PoolNodes(ctx, m.Name)
	require.NoError(t, err)
	require.ElementsMatch(t, live, got, "the pool's nodes are the replacements")

	var rel api.Release
	_, err = env.API().Do(ctx, "GET", "/v1/releases/"+version, nil, &rel)
	require.NoError(t, err)
	requireInstanceNodes(t, ctx, env, live, version, rel.Components.Containerd.Version)
	requireHostsGone(t, ctx, env, w.before)
	t.Logf("MEASURED MIG surge upgrade:\n%s", MIGSummary(u))
}

// requireInstanceNodes: each instance is a lab host, its Node Ready at
// version and schedulable, with its provider ID and zone label, and its
// containerd the release's.
func requireInstanceNodes(t *testing.T, ctx context.Context, env *Env, names []string, version, containerd string) {
	t.Helper()
	all, err := env.Lab.Nodes(ctx)
	require.NoError(t, err)
	inst := map[string]cloud.Instance{}
	for _, in := range env.GroupService().Groups().Instances() {
		inst[in.Name] = in
	}
	for _, name := range names {
		i := slices.IndexFunc(all, func(n kube.NodeInfo) bool { return n.Name == name })
		require.GreaterOrEqual(t, i, 0, "Node %s", name)
		n := all[i]
		require.True(t, n.Ready, name)
		require.False(t, n.Unschedulable, name)
		require.Equal(t, "v"+version, n.KubeletVersion, name)
		in, ok := inst[name]
		require.True(t, ok, "%s is an instance of the lab's groups", name)
		require.Equal(t, cloud.StatusRunning, in.Status, name)
		require.Equal(t, in.ProviderID, n.ProviderID, name)
		require.True(t, strings.HasPrefix(n.ProviderID, lab.ProviderIDScheme+n.Labels[lab.ZoneLabel]+"/"), "%s: provider ID %s, zone %q", name, n.ProviderID, n.Labels[lab.ZoneLabel])
		got, err := env.Lab.ContainerdVersion(ctx, name)
		require.NoError(t, err, name)
		require.Equal(t, containerd, got, "containerd on %s", name)
	}
}

// requireHostsGone: the instances' hosts are stopped and their Nodes
// deleted.
func requireHostsGone(t *testing.T, ctx context.Context, env *Env, names []string) {
	t.Helper()
	all, err := env.Lab.Nodes(ctx)
	require.NoError(t, err)
	for _, name := range names {
		_, err := env.Lab.Host(name)
		require.Error(t, err, "the host of %s is stopped", name)
		require.False(t, slices.ContainsFunc(all, func(n kube.NodeInfo) bool { return n.Name == name }), "the Node %s is deleted", name)
	}
	for _, in := range env.GroupService().Groups().Instances() {
		require.NotContains(t, names, in.Name, "instance %s is gone", in.Name)
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// blueGreenDriver plays the operator of the MIG pool's blue/green upgrade
// through the API, whoever started the upgrade: rollback while blue
// drains, or complete while the pool soaks. It acts once.
type blueGreenDriver struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// acted is the upgrade it acted on, in which phase, and when.
	acted   string
	phase   phases.BlueGreenPhase
	actedAt time.Time
	refused []string
}

func driveBlueGreen(ctx context.Context, env *Env, cmd string) *blueGreenDriver {
	ctx, cancel := context.WithCancel(ctx)
	d := &blueGreenDriver{cancel: cancel, done: make(chan struct{})}
	pool := env.MIG().Name
	go func() {
		defer close(d.done)
		for ctx.Err() == nil {
			if d.step(ctx, env, pool, cmd) {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return d
}

// step acts when the pool is where cmd applies; true once it did.
func (d *blueGreenDriver) step(ctx context.Context, env *Env, pool, cmd string) bool {
	u, err := env.Upgrade(ctx)
	if err != nil || u.State != phases.UpgradeRunning {
		return false
	}
	p, ok := u.Pool(pool)
	if !ok || p.BlueGreen == nil {
		return false
	}
	bg := p.BlueGreen
	switch cmd {
	case phases.PoolRollback:
		// While blue drains: a batch drains, or the batch soak after it
		// (2 s each) holds the phase. Should it have been missed, roll
		// back from the soak rather than wait it out (an hour): the test
		// then fails on the phase it was posted in, at once.
		if bg.Phase != phases.PhaseDrainingBlue && bg.Phase != phases.PhaseSoaking {
			return false
		}
	case phases.PoolComplete:
		if bg.Phase != phases.PhaseSoaking || bg.Completed {
			return false
		}
	}
	err = env.PoolCommand(ctx, pool, cmd)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		// The pool moved on between the read and the command: the
		// command names the rule; look again.
		d.refused = append(d.refused, err.Error())
		return false
	}
	d.acted, d.phase, d.actedAt = u.ID, bg.Phase, time.Now()
	return true
}

// stop ends the driver and returns the upgrade it acted on ("" if none).
func (d *blueGreenDriver) stop() (string, phases.BlueGreenPhase, time.Time, []string) {
	d.cancel()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acted, d.phase, d.actedAt, d.refused
}

// testBlueGreenRollback runs the patch with the MIG pool blue/green and
// rolls the pool back while blue drains (in DRAINING_BLUE_POOL): green's groups,
// hosts and Nodes are deleted, blue is uncordoned and serves at the old
// version, and the upgrade ends cancelled (every other pool at the
// patch), no longer blocking: the next upgrade goes to the same version.
func testBlueGreenRollback(t *testing.T, ctx context.Context, env *Env) {
	t.Cleanup(func() { dumpMIG(t, env) })
	m := env.MIG()
	require.NoError(t, env.SetMIGSettings(ctx, blueGreenSettings()))
	blue, err := env.PoolNodes(ctx, m.Name)
	require.NoError(t, err)
	// Replacements made by the minor enrolled their agents after they
	// joined the pool: preflight wants every agent reporting.
	require.NoError(t, env.WaitAgents(ctx, 2*time.Minute))

	d := driveBlueGreen(ctx, env, phases.PoolRollback)
	probes := env.StartProbes(ctx)
	t0 := time.Now()
	started, err := env.StartUpgrade(ctx, patchVersion)
	require.NoError(t, err)
	u, err := env.Watch(ctx, started.ID, 30*time.Minute, nil)
	reports := probes.Stop()
	acted, phase, at, refused := d.stop()
	require.ErrorContains(t, err, "ended cancelled")
	t.Logf("MEASURED patch with the MIG pool rolled back: %s (rollback posted %s after the start; refused tries: %v)\n%s%s",
		time.Since(t0).Round(time.Second), at.Sub(t0).Round(time.Second), refused, Summary(u), MIGSummary(u))
	requireProbed(t, patchVersion+" (MIG pool rolled back)", reports)
	require.Equal(t, started.ID, acted, "the rollback was posted")
	require.Equal(t, phases.PhaseDrainingBlue, phase)

	require.Equal(t, phases.UpgradeCancelled, u.State)
	p, _ := u.Pool(m.Name)
	require.Equal(t, phases.PhaseRolledBack, p.BlueGreen.Phase)
	require.Equal(t, phases.PhaseDrainingBlue, p.BlueGreen.RollbackFrom)
	s, _ := u.Step(phases.PoolStepID(m.Name))
	require.Equal(t, phases.StateRolledBack, s.State)
	for _, st := range u.Steps {
		if st.ID != s.ID && st.ID != phases.StepIDHealth {
			require.Equal(t, phases.StateDone, st.State, "step %s", st.ID)
		}
	}
	var green []string
	g := env.GroupService().Groups()
	for _, gg := range p.BlueGreen.Green {
		_, err := g.GetGroup(ctx, cloud.GroupRef{Zone: gg.Zone, Name: gg.Name})
		require.ErrorIs(t, err, cloud.ErrNotFound, "green group %s is deleted", gg.Name)
		green = append(green, gg.Nodes...)
	}
	require.Len(t, green, len(blue), "green was as large as blue")
	requireHostsGone(t, ctx, env, green)

	after, err := env.PoolNodes(ctx, m.Name)
	require.NoError(t, err)
	require.ElementsMatch(t, blue, after, "the pool is blue again")
	var rel api.Release
	_, err = env.API().Do(ctx, "GET", "/v1/releases/"+minorVersion, nil, &rel)
	require.NoError(t, err)
	requireInstanceNodes(t, ctx, env, blue, minorVersion, rel.Components.Containerd.Version)
	c, err := env.Cluster(ctx)
	require.NoError(t, err)
	require.Equal(t, minorVersion, c.Status.Version, "status.version waits for every pool")
	require.NoError(t, env.Lab.CheckServing(ctx))
}

// requireBlueGreenCompleted checks the completed blue/green upgrade u of
// the MIG pool: complete was posted during the soak (an hour, never
// waited out); blue's groups, hosts and Nodes are gone; the pool is the
// green groups, their Nodes Ready at the target.
func requireBlueGreenCompleted(t *testing.T, ctx context.Context, env *Env, d *blueGreenDriver, blue []string, u *phases.Upgrade, version string) {
	t.Helper()
	t.Cleanup(func() { dumpMIG(t, env) })
	acted, phase, at, refused := d.stop()
	m := env.MIG()
	require.Equal(t, u.ID, acted, "complete was posted (refused tries: %v)", refused)
	require.Equal(t, phases.PhaseSoaking, phase)
	p, _ := u.Pool(m.Name)
	bg := p.BlueGreen
	require.Equal(t, phases.PhaseCompleted, bg.Phase)
	require.True(t, bg.Completed)
	require.True(t, bg.SoakUntil.After(u.FinishedAt), "the hour's soak was cut short")
	t.Logf("MEASURED MIG blue/green: complete posted at %s, upgrade finished %s later\n%s",
		at.Format(time.TimeOnly), u.FinishedAt.Sub(at).Round(time.Second), MIGSummary(u))

	var groups []api.InstanceGroup
	var green []string
	for _, gg := range bg.Green {
		groups = append(groups, api.InstanceGroup{Zone: gg.Zone, Name: gg.Name})
		green = append(green, gg.Nodes...)
	}
	c, err := env.Cluster(ctx)
	require.NoError(t, err)
	for _, pp := range c.Spec.Pools {
		if pp.Name == m.Name {
			require.Equal(t, groups, pp.Groups, "the pool's groups are green's")
			var names []string
			for _, n := range pp.Nodes {
				names = append(names, n.Name)
			}
			require.ElementsMatch(t, green, names)
		}
	}
	for _, n := range u.PoolNodes(p) {
		grp := p.GroupOf(&n)
		_, err := env.GroupService().Groups().GetGroup(ctx, cloud.GroupRef{Zone: n.Zone, Name: grp})
		require.ErrorIs(t, err, cloud.ErrNotFound, "blue group %s is deleted", grp)
	}
	var rel api.Release
	_, err = env.API().Do(ctx, "GET", "/v1/releases/"+version, nil, &rel)
	require.NoError(t, err)
	requireInstanceNodes(t, ctx, env, green, version, rel.Components.Containerd.Version)
	requireHostsGone(t, ctx, env, blue)
}

// migNodeUpgraded is for requireOrder: whether a node task ends at the
// target. A blue/green pool's blue nodes end done without being upgraded:
// they are deleted, and green's nodes run the target.
func migNodeUpgraded(u *phases.Upgrade, n *phases.NodeTask) bool {
	p, ok := u.Pool(n.Pool)
	return !ok || p.BlueGreen == nil
}

// dumpMIG, when t failed, logs the lab's instances and, for each that
// runs, its kubelet's and agent's state and journal tails.
func dumpMIG(t *testing.T, env *Env) {
	if !t.Failed() || env.GroupService() == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, in := range env.GroupService().Groups().Instances() {
		t.Logf("--- instance %s %s %s (last error: %v)", in.Name, in.ProviderID, in.Status, in.LastError)
		if in.Status != cloud.StatusRunning {
			continue
		}
		out, err := env.Lab.Exec(ctx, in.Name, "sh", "-c", "systemctl is-active kubelet molt-agent; journalctl -u kubelet -u molt-agent --no-pager -n 40 | cut -c1-300")
		t.Logf("%s (err %v)", out, err)
	}
}
