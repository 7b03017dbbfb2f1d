package phases

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Before anything ran, the forecast is the plan: same schedule, same times.
func TestForecastOfAFreshUpgradeIsThePlan(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		workers := rapid.SliceOfN(rapid.IntRange(1, 30), 0, 4).Draw(rt, "workers")
		c := testCluster(rapid.IntRange(0, 2).Draw(rt, "cplb"), rapid.IntRange(1, 5).Draw(rt, "cp"), rapid.IntRange(0, 3).Draw(rt, "lb"), workers...)
		for i := range c.Pools {
			c.Pools[i].Settings.ConcurrentNodes = rapid.IntRange(0, 20).Draw(rt, "cn")
			c.Pools[i].Settings.MinimumAvailableNodes = rapid.IntRange(0, len(c.Pools[i].Nodes)).Draw(rt, "min")
		}
		opts := Options{ConcurrentWorkerPools: rapid.IntRange(0, 4).Draw(rt, "wp")}
		start := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
		to := MustParseVersion("1.34.4")
		plan := MakePlan(c, to, opts, DefaultDurations(), start)
		end, ok := Forecast(NewUpgrade("u", c, to, opts, start), DefaultDurations(), start)
		require.True(rt, ok)
		require.Equal(rt, plan.End, end)
	})
}

func TestForecastPartway(t *testing.T) {
	c := testCluster(0, 1, 0, 4) // cp (1 node), w0 (4 nodes, 2 at a time)
	c.Pools[1].Settings.ConcurrentNodes = 2
	t0 := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	u := NewUpgrade("u", c, MustParseVersion("1.34.4"), Options{}, t0)
	d := Durations{Node: map[Role]time.Duration{RoleControlPlane: 10 * time.Minute, RoleWorker: 4 * time.Minute}, Addons: time.Minute, Lifecycle: time.Minute, Health: time.Minute}

	// The control plane, add-ons and lifecycle are done; w0-0 finished in
	// 6 min, w0-1 started 1 min ago; w0-2 and w0-3 wait.
	now := t0.Add(30 * time.Minute)
	for i := range u.Steps {
		s := &u.Steps[i]
		switch s.ID {
		case "pool/w0":
			s.State, s.StartedAt = StateRunning, now.Add(-7*time.Minute)
		case "health":
		default:
			s.State, s.StartedAt, s.FinishedAt = StateDone, t0, now.Add(-7*time.Minute)
		}
	}
	w := u.Nodes[1:]
	w[0].State, w[0].StartedAt, w[0].FinishedAt = StateDone, now.Add(-7*time.Minute), now.Add(-time.Minute)
	w[1].State, w[1].StartedAt = StateRunning, now.Add(-time.Minute)

	obs := ObservedDurations(u, d)
	require.Equal(t, 6*time.Minute, obs.Node[RoleWorker], "the mean of the finished workers")
	require.Equal(t, 10*time.Minute, obs.Node[RoleControlPlane], "no control-plane node has timestamps: the guess stays")

	end, ok := Forecast(u, obs, now)
	require.True(t, ok)
	// Slots: w0-1 until now+5m, a free one from now. w0-2 now → now+6m,
	// w0-3 now+5m → now+11m; then health 1 min (a finished step's time:
	// none finished, so the guess).
	require.Equal(t, now.Add(12*time.Minute), end)

	// A node far past its expected time is expected to finish now: both
	// slots are free, w0-2 and w0-3 go together.
	w[1].StartedAt = now.Add(-time.Hour)
	end, _ = Forecast(u, obs, now)
	require.Equal(t, now.Add(6*time.Minute+time.Minute), end)

	w[1].State = StateFailed
	_, ok = Forecast(u, obs, now)
	require.False(t, ok, "a failed node halts its pool: no finish to predict")
}

// An automatic upgrade leaves nodes with protected pods until they are
// free: the forecast starts them no earlier. A manual upgrade does them
// last but does not wait, so its forecast ignores the protection.
func TestForecastWaitsForProtectedPodsInAutomaticUpgrades(t *testing.T) {
	c := testCluster(0, 1, 0, 2) // cp (1 node), w0 (2 nodes, 1 at a time)
	t0 := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	d := Durations{Node: map[Role]time.Duration{RoleControlPlane: 10 * time.Minute, RoleWorker: 4 * time.Minute}, Addons: time.Minute, Lifecycle: time.Minute, Health: time.Minute}
	for _, automatic := range []bool{false, true} {
		u := NewUpgrade("u", c, MustParseVersion("1.34.4"), Options{Automatic: automatic}, t0)
		now := t0.Add(30 * time.Minute)
		for i := range u.Steps {
			s := &u.Steps[i]
			switch s.ID {
			case "pool/w0":
				s.State, s.StartedAt = StateRunning, now
			case "health":
			default:
				s.State, s.StartedAt, s.FinishedAt = StateDone, t0, now
			}
		}
		u.Nodes[0].State = StateDone
		u.Nodes[1].ProtectedUntil = now.Add(3 * 24 * time.Hour)
		end, ok := Forecast(u, d, now)
		require.True(t, ok)
		if !automatic {
			// w0-1 and w0-0 one after the other, then health.
			require.Equal(t, now.Add(9*time.Minute), end)
			continue
		}
		// w0-1 now → +4m; w0-0 when its pods are free, +4m; then health.
		require.Equal(t, now.Add(3*24*time.Hour+5*time.Minute), end)
	}
}
