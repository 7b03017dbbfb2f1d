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
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/phases"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// renderCluster is a small cluster: one control-plane LB, three
// control-plane nodes, one worker pool of four nodes two at a time.
func renderCluster() *phases.ClusterSpec {
	pool := func(name string, role phases.Role, n, concurrent int) phases.Pool {
		p := phases.Pool{Name: name, Role: role, Backing: phases.BackingBareMetal}
		p.Settings.ConcurrentNodes = concurrent
		for i := 0; i < n; i++ {
			p.Nodes = append(p.Nodes, phases.Node{Name: name + "-" + string(rune('1'+i))})
		}
		return p
	}
	return &phases.ClusterSpec{Name: "lab", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.33.13"),
		Pools: []phases.Pool{
			pool("cplb", phases.RoleControlPlaneLB, 1, 1),
			pool("cp", phases.RoleControlPlane, 3, 1),
			pool("workers", phases.RoleWorker, 4, 2),
		}}
}

// TestRenderUpgradeGolden pins the watch view at the moments an operator
// sees most: just started, midway with nodes in flight (the ETA from the
// schedule of what is left and the observed node times), a failed node,
// paused by a window, done.
func TestRenderUpgradeGolden(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	fresh := func() *phases.Upgrade {
		return phases.NewUpgrade("lab-1.34.4-1", renderCluster(), phases.MustParseVersion("1.34.4"), phases.Options{}, t0)
	}
	midway := func() *phases.Upgrade {
		u := fresh()
		for i := range u.Steps {
			s := &u.Steps[i]
			switch s.ID {
			case "pool/cplb", "pool/cp", "addons", "lifecycle":
				s.State, s.StartedAt, s.FinishedAt = phases.StateDone, t0, t0.Add(20*time.Minute)
			case "pool/workers":
				s.State, s.StartedAt = phases.StateRunning, t0.Add(20*time.Minute)
			}
		}
		for i := 0; i < 4; i++ { // cplb and cp: 5 min each
			n := &u.Nodes[i]
			n.State, n.Version, n.StartedAt, n.FinishedAt = phases.StateDone, u.To, t0.Add(time.Duration(i)*5*time.Minute), t0.Add(time.Duration(i+1)*5*time.Minute)
		}
		w := u.Nodes[4:]
		w[0].State, w[0].Version, w[0].StartedAt, w[0].FinishedAt = phases.StateDone, u.To, t0.Add(20*time.Minute), t0.Add(23*time.Minute)
		w[1].State, w[1].Cursor, w[1].StartedAt = phases.StateRunning, 1, t0.Add(21*time.Minute)
		w[2].State, w[2].Cursor, w[2].StartedAt = phases.StateRunning, 2, t0.Add(23*time.Minute)
		return u
	}
	now := t0.Add(24 * time.Minute)
	cases := map[string]func() *phases.Upgrade{
		"started": fresh,
		"midway":  midway,
		"failed-node": func() *phases.Upgrade {
			u := midway()
			u.Nodes[5].State, u.Nodes[5].Error = phases.StateFailed, "UpgradeKubelet: sha256 mismatch"
			return u
		},
		"red-gate": func() *phases.Upgrade {
			u := midway()
			u.Nodes[5].RedGate, u.Nodes[5].Waiting = "errors", "gate errors red: no result"
			return u
		},
		"failed-rolled-back": func() *phases.Upgrade {
			u := midway()
			p, _ := u.Pool("workers")
			p.FailReason = "1 of 4 nodes failed, its failure budget is 1 (maxFailedNodes): workers-2 (operation:UpgradeBinary:kubelet: component not healthy)"
			p.RollingBack = true
			s, _ := u.Step("pool/workers")
			s.State = phases.StateRolledBack
			for i := 4; i < 7; i++ {
				u.Nodes[i].State, u.Nodes[i].Rollback, u.Nodes[i].Version = phases.StateDone, true, u.From
			}
			u.State, u.FinishedAt = phases.UpgradeFailed, now
			u.Reason = "pool workers: " + p.FailReason + "; rolled back: workers"
			return u
		},
		"protected-automatic": func() *phases.Upgrade {
			u := midway()
			u.Options.Automatic = true
			u.Nodes[7].ProtectedUntil = now.Add(3 * 24 * time.Hour)
			return u
		},
		"paused": func() *phases.Upgrade {
			u := midway()
			u.PauseReason, u.PausedAt = "MAINTENANCE_WINDOW", now
			return u
		},
		"preflight": func() *phases.Upgrade {
			u := fresh()
			u.State, u.Preflight = phases.UpgradePreflight, "lab-3"
			return u
		},
		"refused": func() *phases.Upgrade {
			u := fresh()
			u.State, u.Preflight, u.FinishedAt = phases.UpgradeRefused, "lab-3", t0.Add(40*time.Second)
			u.RefusedChecks = []string{"agents-reporting", "disk-space"}
			return u
		},
		"done": func() *phases.Upgrade {
			u := fresh()
			for i := range u.Steps {
				u.Steps[i].State = phases.StateDone
			}
			for i := range u.Nodes {
				u.Nodes[i].State = phases.StateDone
			}
			u.State, u.FinishedAt = phases.UpgradeDone, t0.Add(41*time.Minute)
			return u
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			u := mk()
			renderUpgrade(&b, u, convert.UpgradeForecastToAPI(u, now), now)
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
	u := phases.NewUpgrade("lab-1.34.4-1", renderCluster(), phases.MustParseVersion("1.34.4"), phases.Options{}, t0)
	clientNow := t0.Add(3 * time.Hour) // a client clock hours ahead
	var b bytes.Buffer
	renderUpgrade(&b, u, &api.UpgradeForecast{At: t0.Add(time.Minute), End: t0.Add(71 * time.Minute)}, clientNow)
	require.Contains(t, b.String(), "ETA 1h10m0s (03:11 UTC)")

	b.Reset()
	renderUpgrade(&b, u, nil, clientNow)
	require.Contains(t, b.String(), "no ETA")
}
