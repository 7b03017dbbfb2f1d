package convert_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/internal/filltest"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

// filler fills both sides with values the conversions accept: an engine
// version is 1.N.N, and a wire string that holds a version ("version",
// "from", "to") is one in text.
func filler() *filltest.Filler {
	return &filltest.Filler{
		Types: map[reflect.Type]func(int) any{
			reflect.TypeFor[phases.Version](): func(n int) any { return phases.Version{Major: 1, Minor: n, Patch: n} },
			// The wire writes durations in whole seconds ("3600s").
			reflect.TypeFor[time.Duration](): func(n int) any { return time.Duration(n) * time.Second },
		},
		Fields: func(name string, n int) (string, bool) {
			switch name {
			case "Version", "From", "To":
				return fmt.Sprintf("1.%d.%d", n, n), true
			case "BatchSoak", "PoolSoak", "Soaked", "NodePoolSoakDuration", "BatchSoakDuration", "For", "HealthTimeout", "GateTimeout", "AgentTimeout":
				return fmt.Sprintf("%ds", n), true
			}
			return "", false
		},
	}
}

// TestEngineToAPIToEngineIsLossless fills every field of each engine type
// the API carries and converts it to the wire and back: a field added to
// the engine and not converted comes back zero and fails here.
func TestEngineToAPIToEngineIsLossless(t *testing.T) {
	t.Run("ClusterSpec", func(t *testing.T) {
		in := filltest.New[phases.ClusterSpec](filler())
		out, err := convert.ClusterSpecFromAPI(convert.ClusterSpecToAPI(in))
		require.NoError(t, err)
		require.Equal(t, in, out)
	})
	t.Run("Upgrade", func(t *testing.T) {
		in := filltest.New[*phases.Upgrade](filler())
		in.BuildIndex() // a converted upgrade has its indexes built; compare like with like
		// An input of NewUpgrade, not kept in an upgrade (each host's
		// From holds it).
		in.Options.AgentVersions = nil
		out, err := convert.UpgradeFromAPI(convert.UpgradeToAPI(in))
		require.NoError(t, err)
		require.Equal(t, in, out)
	})
	t.Run("Plan", func(t *testing.T) {
		in := filltest.New[phases.Plan](filler())
		out, err := convert.PlanFromAPI(convert.PlanToAPI(in))
		require.NoError(t, err)
		require.Equal(t, in, out)
	})
	t.Run("PreflightReport", func(t *testing.T) {
		in := filltest.New[preflight.Report](filler())
		require.Equal(t, in, convert.PreflightReportFromAPI(convert.PreflightReportToAPI(in)))
	})
}

// TestAPIToEngineToAPIIsLossless is the other direction: a field added to
// a wire type and not converted fails here.
func TestAPIToEngineToAPIIsLossless(t *testing.T) {
	t.Run("ClusterSpec", func(t *testing.T) {
		in := filltest.New[api.ClusterSpec](filler())
		in.Kubeconfig = "" // the engine does not hold it; the caller keeps it
		// Nor the policy: MaintenancePolicyFromAPI reads it
		// (TestMaintenancePolicyIsThePolicyEndpoints).
		in.MaintenancePolicy = nil
		// Nor adopt: a request's instruction to the registration
		// (Coordinator.PutCluster), never stored.
		in.Adopt = false
		spec, err := convert.ClusterSpecFromAPI(in)
		require.NoError(t, err)
		require.Equal(t, in, convert.ClusterSpecToAPI(spec))
	})
	t.Run("Upgrade", func(t *testing.T) {
		in := filltest.New[*api.Upgrade](filler())
		// Not part of the upgrade: made per answer (UpgradeForecastToAPI).
		in.Forecast = nil
		// Nor these: the engine's reading of the upgrade, made again from
		// it (the filler's states are none the engine knows, so none is
		// set on the way back).
		in.InProgress, in.Failing = false, ""
		for i := range in.Nodes {
			in.Nodes[i].Step = ""
		}
		u, err := convert.UpgradeFromAPI(in)
		require.NoError(t, err)
		require.Equal(t, in, convert.UpgradeToAPI(u))
	})
	t.Run("Plan", func(t *testing.T) {
		in := filltest.New[api.Plan](filler())
		p, err := convert.PlanFromAPI(in)
		require.NoError(t, err)
		require.Equal(t, in, convert.PlanToAPI(p))
	})
	t.Run("PreflightReport", func(t *testing.T) {
		in := filltest.New[api.PreflightReport](filler())
		require.Equal(t, in, convert.PreflightReportToAPI(convert.PreflightReportFromAPI(in)))
	})
}

var t0 = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

func realisticCluster() *phases.ClusterSpec {
	two := 2
	return &phases.ClusterSpec{Name: "lab", Kind: phases.KindStandalone, Channel: "regular", Version: phases.MustParseVersion("1.33.6"),
		Pools: []phases.Pool{
			{Name: "cp", Role: phases.RoleControlPlane, Backing: phases.BackingBareMetal,
				Nodes: []phases.Node{{Name: "cp-1", Address: "10.0.0.11"}, {Name: "cp-2", Address: "10.0.0.12"}, {Name: "cp-3", Address: "10.0.0.13"}}},
			{Name: "workers", Role: phases.RoleWorker, Settings: phases.UpgradeSettings{ConcurrentNodes: 2, MinimumAvailableNodes: 1},
				Nodes: []phases.Node{{Name: "worker-1", Zone: "a"}, {Name: "worker-2", Zone: "b"}, {Name: "worker-3", Zone: "a"}}},
			{Name: "burst", Role: phases.RoleWorker, Backing: phases.BackingMIG, Settings: phases.UpgradeSettings{Strategy: "surge", MaxSurge: &two},
				Nodes: []phases.Node{{Name: "burst-1"}, {Name: "burst-2"}}},
		}}
}

// realisticUpgrade is an upgrade midway: the control plane done, a worker
// pool running with one node drained (a pod left behind) and one failed.
func realisticUpgrade(t *testing.T) *phases.Upgrade {
	t.Helper()
	u := phases.NewUpgrade("lab-1.34.4-1", realisticCluster(), phases.MustParseVersion("1.34.4"),
		phases.Options{Automatic: true, ConcurrentWorkerPools: 2}, t0)
	now := t0
	for range 200 {
		now = now.Add(time.Minute)
		d := phases.Decide(u, now, phases.Open)
		progressed := false
		for _, a := range d.Actions {
			switch {
			case a.Commits():
				progressed = u.Apply(a, now) == nil || progressed
			case a.Kind == phases.ActRunStep:
				progressed = u.ApplyStepResult(phases.StepResult{Upgrade: u.ID, Step: a.Step, Attempt: a.Attempt, OK: true, Message: "ok"}, now) == nil || progressed
			case a.Node == "worker-2" && a.Cursor == 1:
				progressed = u.ApplyNodeStepResult(phases.NodeStepResult{Upgrade: u.ID, Node: a.Node, Cursor: a.Cursor, Attempt: a.Attempt,
					OK: false, Message: "pdb web/frontend refused eviction"}, now) == nil || progressed
			case a.Node == "worker-1" && a.Cursor > 2:
				// worker-1 stays in flight after its drain.
			default:
				res := phases.NodeStepResult{Upgrade: u.ID, Node: a.Node, Cursor: a.Cursor, Attempt: a.Attempt, OK: true}
				if a.NodeStep.Kind == phases.NodeDrain {
					res.LeftBehind = []phases.LeftPod{{Namespace: "web", Name: "frontend-1", Reason: "pdb", EvictableAt: now.Add(time.Hour)}}
				}
				progressed = u.ApplyNodeStepResult(res, now) == nil || progressed
			}
		}
		if !progressed {
			break
		}
	}
	n, _ := u.Node("worker-2")
	require.Equal(t, phases.StateFailed, n.State, "the upgrade is midway, as intended")
	return u
}

// TestRealisticUpgradeSurvivesTheWire converts a realistic upgrade to the
// wire and back, directly and through JSON as the coordinator and moltctl
// do: it comes back equal (lookup indexes built), its JSON is stable, and
// the engine decides and forecasts the same on it.
func TestRealisticUpgradeSurvivesTheWire(t *testing.T) {
	u := realisticUpgrade(t)
	back, err := convert.UpgradeFromAPI(convert.UpgradeToAPI(u))
	require.NoError(t, err)
	require.Equal(t, u, back, "equal, lookup indexes included: Decide never has to build them under a read lock")

	sent, err := json.Marshal(convert.UpgradeToAPI(u))
	require.NoError(t, err)
	var wire api.Upgrade
	require.NoError(t, json.Unmarshal(sent, &wire))
	received, err := convert.UpgradeFromAPI(&wire)
	require.NoError(t, err)
	again, err := json.Marshal(convert.UpgradeToAPI(received))
	require.NoError(t, err)
	require.Equal(t, string(sent), string(again), "what the wire carried re-encodes to the same bytes")

	now := t0.Add(3 * time.Hour)
	require.Equal(t, phases.Decide(u, now, phases.Open), phases.Decide(received, now, phases.Open))
	dur := phases.ObservedDurations(u, phases.DefaultDurations())
	require.Equal(t, dur, phases.ObservedDurations(received, phases.DefaultDurations()))
	_, ok := phases.Forecast(received, dur, now)
	require.False(t, ok, "a failed node holds its pool: no forecast")
	for _, v := range []*phases.Upgrade{u, received} {
		require.NoError(t, v.RetryNode("worker-2", now))
	}
	end, ok := phases.Forecast(u, dur, now)
	require.True(t, ok)
	endReceived, ok := phases.Forecast(received, dur, now)
	require.True(t, ok)
	require.Equal(t, end, endReceived)
}

func TestRealisticPlanAndReportSurviveTheWire(t *testing.T) {
	plan := phases.MakePlan(realisticCluster(), phases.MustParseVersion("1.34.4"), phases.Options{ConcurrentWorkerPools: 2}, phases.DefaultDurations(), t0)
	back, err := convert.PlanFromAPI(convert.PlanToAPI(plan))
	require.NoError(t, err)
	require.Equal(t, plan, back)
	var wire api.Plan
	roundTripJSON(t, convert.PlanToAPI(plan), &wire)
	received, err := convert.PlanFromAPI(wire)
	require.NoError(t, err)
	require.Equal(t, plan.Total, received.Total)
	require.Equal(t, mustJSON(t, convert.PlanToAPI(plan)), mustJSON(t, convert.PlanToAPI(received)))

	rep := preflight.Aggregate([]preflight.Result{
		{Check: preflight.IDAgentsReporting, Severity: preflight.Blocking, Status: preflight.Pass, Message: "3 of 3 agents report"},
		{Check: preflight.IDPDBsBlockingDrain, Severity: preflight.Warning, Status: preflight.Warn, Message: "pdb web/frontend allows no disruption",
			Data: map[string]string{"worker-1": "web/frontend"}},
	})
	var wireRep api.PreflightReport
	roundTripJSON(t, convert.PreflightReportToAPI(rep), &wireRep)
	require.Equal(t, rep, convert.PreflightReportFromAPI(wireRep))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func roundTripJSON(t *testing.T, in, out any) {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, out))
}

// TestNilAndEmptyStayApart: JSON tells a nil slice (null, or absent) from
// an empty one ([]), so the conversions keep them apart both ways.
func TestNilAndEmptyStayApart(t *testing.T) {
	for _, u := range []*phases.Upgrade{
		{ID: "nil"},
		{ID: "empty", RefusedChecks: []string{}, Steps: []phases.Step{}, Pools: []phases.PoolTrack{}, Nodes: []phases.NodeTask{}},
	} {
		u.BuildIndex()
		wire := convert.UpgradeToAPI(u)
		require.Equal(t, u.Steps == nil, wire.Steps == nil, u.ID)
		require.Equal(t, u.RefusedChecks == nil, wire.RefusedChecks == nil, u.ID)
		back, err := convert.UpgradeFromAPI(wire)
		require.NoError(t, err)
		require.Equal(t, u, back, u.ID)
	}
	require.Nil(t, convert.UpgradeToAPI(nil))
	u, err := convert.UpgradeFromAPI(nil)
	require.NoError(t, err)
	require.Nil(t, u)
}

func TestFromAPIRefusesAnInvalidVersion(t *testing.T) {
	_, err := convert.ClusterSpecFromAPI(api.ClusterSpec{Name: "lab", Version: "banana"})
	require.ErrorIs(t, err, phases.ErrInvalidVersion)
	require.ErrorContains(t, err, "version")

	_, err = convert.UpgradeFromAPI(&api.Upgrade{ID: "u", From: "1.33.6", To: "1.34.4", Nodes: []api.NodeTask{{Node: "cp-1", Version: "2.0.0"}}})
	require.ErrorIs(t, err, phases.ErrInvalidVersion)
	require.ErrorContains(t, err, "node cp-1")

	_, err = convert.PlanFromAPI(api.Plan{Cluster: "lab", From: "1.33", To: "1.34.4"})
	require.ErrorIs(t, err, phases.ErrInvalidVersion)

	spec, err := convert.ClusterSpecFromAPI(api.ClusterSpec{Name: "lab"})
	require.NoError(t, err, "an empty version is the zero version")
	require.True(t, spec.Version.IsZero())
}
