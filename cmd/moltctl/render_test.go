package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// renderUpgrade is a small cluster's upgrade as GET .../upgrade answers
// it, just started: one control-plane LB, three control-plane nodes, one
// worker pool of four nodes two at a time, bare metal.
func renderUpgradeWire(t0 time.Time) *api.Upgrade {
	u := &api.Upgrade{ID: "lab-1.34.4-1", Cluster: "lab", From: "1.33.13", To: "1.34.4", State: api.UpgradeRunning,
		CreatedAt: t0, InProgress: true}
	steps := []api.NodeStep{{Kind: api.NodeStepCordon}, {Kind: api.NodeStepDrain},
		{Kind: api.NodeStepOperation, Op: &api.OpSpec{Kind: api.OpImportImages}},
		{Kind: api.NodeStepOperation, Op: &api.OpSpec{Kind: api.OpUpgradeBinary, Component: "containerd"}},
		{Kind: api.NodeStepOperation, Op: &api.OpSpec{Kind: api.OpUpgradeBinary, Component: "kubelet"}},
		{Kind: api.NodeStepWaitReady}, {Kind: api.NodeStepUncordon}}
	pool := func(name string, role api.Role, n, concurrent int) {
		u.Pools = append(u.Pools, api.PoolTrack{Name: name, Role: role, NodeSteps: steps, Concurrency: concurrent, First: len(u.Nodes), Count: n, Backing: api.BackingBareMetal})
		for i := 0; i < n; i++ {
			u.Nodes = append(u.Nodes, api.NodeTask{Node: name + "-" + string(rune('1'+i)), Pool: name, State: api.StepPending, Version: u.From})
		}
	}
	pool("cplb", api.RoleControlPlaneLB, 1, 1)
	pool("cp", api.RoleControlPlane, 3, 1)
	pool("workers", api.RoleWorker, 4, 2)
	step := func(id string, kind api.StepKind, pool string, deps ...string) {
		u.Steps = append(u.Steps, api.Step{ID: id, Kind: kind, Pool: pool, Deps: deps, State: api.StepPending})
	}
	step("pool/cplb", api.StepKindPool, "cplb")
	step("pool/cp", api.StepKindPool, "cp", "pool/cplb")
	step(api.StepIDAddons, api.StepKindAddons, "", "pool/cp")
	step(api.StepIDLifecycle, api.StepKindLifecycle, "", "pool/cp")
	step("pool/workers", api.StepKindPool, "workers", api.StepIDAddons, api.StepIDLifecycle)
	step(api.StepIDHealth, api.StepKindHealth, "", "pool/cplb", "pool/cp", api.StepIDAddons, api.StepIDLifecycle, "pool/workers")
	return u
}

// TestRenderUpgradeGolden pins the watch view at the moments an operator
// sees most: just started, midway with nodes in flight (the coordinator's
// ETA), a failed node, paused by a window, done. The inputs are what the
// coordinator answers: the view reads each node's step, the failing
// reason and the forecast off the wire.
func TestRenderUpgradeGolden(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	now := t0.Add(24 * time.Minute)
	forecast := func(left time.Duration) *api.UpgradeForecast {
		return &api.UpgradeForecast{At: now, End: now.Add(left)}
	}
	fresh := func() *api.Upgrade {
		u := renderUpgradeWire(t0)
		u.Forecast = forecast(40 * time.Minute)
		return u
	}
	midway := func() *api.Upgrade {
		u := renderUpgradeWire(t0)
		for i := range u.Steps {
			s := &u.Steps[i]
			switch s.ID {
			case "pool/cplb", "pool/cp", "addons", "lifecycle":
				s.State, s.StartedAt, s.FinishedAt = api.StepDone, t0, t0.Add(20*time.Minute)
			case "pool/workers":
				s.State, s.StartedAt = api.StepRunning, t0.Add(20*time.Minute)
			}
		}
		for i := 0; i < 4; i++ { // cplb and cp: 5 min each
			n := &u.Nodes[i]
			n.State, n.Version, n.StartedAt, n.FinishedAt = api.StepDone, u.To, t0.Add(time.Duration(i)*5*time.Minute), t0.Add(time.Duration(i+1)*5*time.Minute)
		}
		w := u.Nodes[4:]
		w[0].State, w[0].Version, w[0].StartedAt, w[0].FinishedAt = api.StepDone, u.To, t0.Add(20*time.Minute), t0.Add(23*time.Minute)
		w[1].State, w[1].Cursor, w[1].Step, w[1].StartedAt = api.StepRunning, 1, "drain", t0.Add(21*time.Minute)
		w[2].State, w[2].Cursor, w[2].Step, w[2].StartedAt = api.StepRunning, 2, "operation:ImportImages", t0.Add(23*time.Minute)
		u.Forecast = forecast(5 * time.Minute)
		return u
	}
	cases := map[string]func() *api.Upgrade{
		"started": fresh,
		"midway":  midway,
		"failed-node": func() *api.Upgrade {
			u := midway()
			u.Nodes[5].State, u.Nodes[5].Error = api.StepFailed, "UpgradeKubelet: sha256 mismatch"
			u.Forecast = nil // a failed node holds its pool
			return u
		},
		"red-gate": func() *api.Upgrade {
			u := midway()
			u.Nodes[5].RedGate, u.Nodes[5].Waiting = "errors", "gate errors red: no result"
			return u
		},
		"failed-rolled-back": func() *api.Upgrade {
			u := midway()
			p, _ := u.Pool("workers")
			p.FailReason = "1 of 4 nodes failed, its failure budget is 1 (maxFailedNodes): workers-2 (operation:UpgradeBinary:kubelet: component not healthy)"
			p.RollingBack = true
			s, _ := u.Step("pool/workers")
			s.State = api.StepRolledBack
			for i := 4; i < 7; i++ {
				u.Nodes[i].State, u.Nodes[i].Rollback, u.Nodes[i].Version, u.Nodes[i].Step = api.StepDone, true, u.From, ""
			}
			u.State, u.FinishedAt, u.InProgress, u.Forecast = api.UpgradeFailed, now, false, nil
			u.Reason = "pool workers: " + p.FailReason + "; rolled back: workers"
			return u
		},
		"protected-automatic": func() *api.Upgrade {
			u := midway()
			u.Options.Automatic = true
			u.Nodes[7].ProtectedUntil = now.Add(3 * 24 * time.Hour)
			u.Forecast = forecast(72*time.Hour + 5*time.Minute)
			return u
		},
		"paused": func() *api.Upgrade {
			u := midway()
			u.PauseReason, u.PausedAt = api.PauseMaintenanceWindow, now
			return u
		},
		"preflight": func() *api.Upgrade {
			u := renderUpgradeWire(t0)
			u.State, u.Preflight = api.UpgradePreflight, "lab-3"
			return u
		},
		"refused": func() *api.Upgrade {
			u := renderUpgradeWire(t0)
			u.State, u.Preflight, u.FinishedAt, u.InProgress = api.UpgradeRefused, "lab-3", t0.Add(40*time.Second), false
			u.RefusedChecks = []string{"agents-reporting", "disk-space"}
			return u
		},
		"done": func() *api.Upgrade {
			u := renderUpgradeWire(t0)
			for i := range u.Steps {
				u.Steps[i].State = api.StepDone
			}
			for i := range u.Nodes {
				u.Nodes[i].State = api.StepDone
			}
			u.State, u.FinishedAt, u.InProgress = api.UpgradeDone, t0.Add(41*time.Minute), false
			return u
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			renderUpgrade(&b, mk(), now)
			golden := filepath.Join("testdata", "watch-"+name+".golden")
			if *update {
				require.NoError(t, os.MkdirAll("testdata", 0o755))
				require.NoError(t, os.WriteFile(golden, b.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "run with -update to create it")
			require.Equal(t, string(want), b.String())
		})
	}
}

// TestRenderUpgradeETAIsTheCoordinators: the ETA shown is the forecast
// the coordinator answered with, what was left on its clock (End-At),
// however far the client's clock is off; without one there is no ETA.
func TestRenderUpgradeETAIsTheCoordinators(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	u := renderUpgradeWire(t0)
	clientNow := t0.Add(3 * time.Hour) // a client clock hours ahead
	var b bytes.Buffer
	u.Forecast = &api.UpgradeForecast{At: t0.Add(time.Minute), End: t0.Add(71 * time.Minute)}
	renderUpgrade(&b, u, clientNow)
	require.Contains(t, b.String(), "ETA 1h10m0s (03:11 UTC)")

	b.Reset()
	u.Forecast = nil
	renderUpgrade(&b, u, clientNow)
	require.Contains(t, b.String(), "no ETA")
}

// TestRenderUpgradeReadsTheWire: the view shows the coordinator's reading
// of the upgrade as it is — the failing reason, each node's step — and
// derives neither from the pools (a client has no engine to derive them
// with): here the pool carries no failure and no node step list, yet the
// coordinator's reading is shown.
func TestRenderUpgradeReadsTheWire(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	u := renderUpgradeWire(t0)
	u.Steps[0].State = api.StepRunning
	u.Pools[0].NodeSteps = nil
	u.Nodes[0].State, u.Nodes[0].Cursor, u.Nodes[0].Step = api.StepRunning, 5, "gates"
	u.Failing = "step addons failed: helm timed out"
	var b bytes.Buffer
	renderUpgrade(&b, u, t0.Add(time.Minute))
	require.Contains(t, b.String(), "failing, nothing new starts: step addons failed: helm timed out")
	require.Contains(t, b.String(), "0/1  cplb-1:gates")

	// A coordinator before 0.2.0 sends no step: the node is still listed.
	u.Nodes[0].Step = ""
	b.Reset()
	renderUpgrade(&b, u, t0.Add(time.Minute))
	require.Contains(t, b.String(), "0/1  cplb-1\n")
}
