//go:build e2e

package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/cloud"
)

// The MIG pool's part of the end-to-end run (e2e_test.go): the lab's
// instance groups, 2 zones × 1 instance, registered as pool "mig" beside
// the bare-metal pools. The patch runs blue/green twice: the first time
// (under the faults) rolled back while blue drains, the second completed
// during the soak. The surge is the demo's (its minor, verify.go).

// blueGreenSettings are the patch's: one node per batch, a short batch
// soak, and a pool soak of an hour that only complete can cut short.
func blueGreenSettings() api.UpgradeSettings {
	one := 1
	return api.UpgradeSettings{Strategy: api.StrategyBlueGreen, BlueGreenSettings: &api.BlueGreenSettings{
		StandardRolloutPolicy: &api.StandardRolloutPolicy{BatchNodeCount: &one, BatchSoakDuration: "2s"},
		NodePoolSoakDuration:  "3600s"}}
}

// requireInstanceNodes: VerifyInstanceNodes (verify.go).
func requireInstanceNodes(t *testing.T, ctx context.Context, env *Env, names []string, version, containerd string) {
	t.Helper()
	require.NoError(t, VerifyInstanceNodes(ctx, env, names, version, containerd))
}

// requireHostsGone: VerifyHostsGone (verify.go).
func requireHostsGone(t *testing.T, ctx context.Context, env *Env, names []string) {
	t.Helper()
	require.NoError(t, VerifyHostsGone(ctx, env, names))
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
	phase   string
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
	if err != nil || u.State != api.UpgradeRunning {
		return false
	}
	p, ok := u.Pool(pool)
	if !ok || p.BlueGreen == nil {
		return false
	}
	bg := p.BlueGreen
	switch cmd {
	case api.PoolRollback:
		// While blue drains: a batch drains, or the batch soak after it
		// (2 s each) holds the phase. Should it have been missed, roll
		// back from the soak rather than wait it out (an hour): the test
		// then fails on the phase it was posted in, at once.
		if bg.Phase != api.BlueGreenDrainingBlue && bg.Phase != api.BlueGreenSoaking {
			return false
		}
	case api.PoolComplete:
		if bg.Phase != api.BlueGreenSoaking || bg.Completed {
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
func (d *blueGreenDriver) stop() (string, string, time.Time, []string) {
	d.cancel()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acted, d.phase, d.actedAt, d.refused
}

// startBlueGreenRollback makes the MIG pool's next upgrade blue/green and
// starts the operator who rolls the pool back while blue drains (in
// DRAINING_BLUE_POOL); it returns blue's nodes and the driver for
// requireRolledBack.
func startBlueGreenRollback(t *testing.T, ctx context.Context, env *Env) ([]string, *blueGreenDriver) {
	t.Cleanup(func() { dumpMIG(t, env) })
	require.NoError(t, env.SetMIGSettings(ctx, blueGreenSettings()))
	blue, err := env.PoolNodes(ctx, env.MIG().Name)
	require.NoError(t, err)
	// Instances enroll their agents after they join the pool: preflight
	// wants every agent reporting.
	require.NoError(t, env.WaitAgents(ctx, 2*time.Minute))
	return blue, driveBlueGreen(ctx, env, api.PoolRollback)
}

// requireRolledBack checks the upgrade u (started as id) whose MIG pool
// was rolled back while blue drained: green's groups, hosts and Nodes are
// deleted, blue is uncordoned and serves at the old version, and the
// upgrade ended cancelled with every other pool at the patch, no longer
// blocking: the next upgrade goes to the same version.
func requireRolledBack(t *testing.T, ctx context.Context, env *Env, u *api.Upgrade, id string, d *blueGreenDriver, blue []string) {
	t.Helper()
	m := env.MIG()
	acted, phase, _, refused := d.stop()
	require.Equal(t, id, acted, "the rollback was posted (refused tries: %v)", refused)
	require.Equal(t, api.BlueGreenDrainingBlue, phase)

	require.Equal(t, api.UpgradeCancelled, u.State)
	p, _ := u.Pool(m.Name)
	require.Equal(t, api.BlueGreenRolledBack, p.BlueGreen.Phase)
	require.Equal(t, api.BlueGreenDrainingBlue, p.BlueGreen.RollbackFrom)
	s, _ := u.Step(api.PoolStepID(m.Name))
	require.Equal(t, api.StepRolledBack, s.State)
	for _, st := range u.Steps {
		if st.ID != s.ID && st.ID != api.StepIDHealth {
			require.Equal(t, api.StepDone, st.State, "step %s", st.ID)
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
	_, err = env.API().Do(ctx, "GET", "/v1/releases/"+u.From, nil, &rel)
	require.NoError(t, err)
	requireInstanceNodes(t, ctx, env, blue, u.From, rel.Components.Containerd.Version)
	c, err := env.Cluster(ctx)
	require.NoError(t, err)
	require.Equal(t, u.From, c.Status.Version, "status.version waits for every pool")
	require.NoError(t, env.Lab.CheckServing(ctx))
}

// requireBlueGreenCompleted checks the completed blue/green upgrade u of
// the MIG pool: complete was posted during the soak (an hour, never
// waited out); blue's groups, hosts and Nodes are gone; the pool is the
// green groups, their Nodes Ready at the target.
func requireBlueGreenCompleted(t *testing.T, ctx context.Context, env *Env, d *blueGreenDriver, blue []string, u *api.Upgrade, version string) {
	t.Helper()
	t.Cleanup(func() { dumpMIG(t, env) })
	acted, phase, at, refused := d.stop()
	m := env.MIG()
	require.Equal(t, u.ID, acted, "complete was posted (refused tries: %v)", refused)
	require.Equal(t, api.BlueGreenSoaking, phase)
	p, _ := u.Pool(m.Name)
	bg := p.BlueGreen
	require.Equal(t, api.BlueGreenCompleted, bg.Phase)
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
		grp := groupOf(p, n.Zone)
		_, err := env.GroupService().Groups().GetGroup(ctx, cloud.GroupRef{Zone: n.Zone, Name: grp})
		require.ErrorIs(t, err, cloud.ErrNotFound, "blue group %s is deleted", grp)
	}
	var rel api.Release
	_, err = env.API().Do(ctx, "GET", "/v1/releases/"+version, nil, &rel)
	require.NoError(t, err)
	requireInstanceNodes(t, ctx, env, green, version, rel.Components.Containerd.Version)
	requireHostsGone(t, ctx, env, blue)
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
