package coordinator_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// TestAutomaticUpgradePausesAtWindowEndAndResumes drives an automatic
// upgrade with a fake clock: it starts inside a nightly window, the window
// closes while a worker is being upgraded, that worker finishes but no
// other starts, the pause reason is recorded, and the next night the
// upgrade resumes and completes.
func TestAutomaticUpgradePausesAtWindowEndAndResumes(t *testing.T) {
	ops := newFakeOps()
	night := time.Date(2026, 11, 23, 1, 30, 0, 0, time.UTC)
	clock := clock.NewManual(night)
	m := startMemberAt(t, "m1", t.TempDir(), true, ops, "", "127.0.0.1:0", clock)
	tc := &testCluster{t: t, members: []*member{m}, ops: ops}
	tc.waitLeader()
	cl := m.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.33.7", release("1.33.7"))
	spec := clusterSpec("lab", "1.33.6")
	put(t, cl, "/v1/clusters/lab", spec)
	// Every night 01:00–05:00 UTC, given as 02:00–06:00 at +01:00 (a
	// window must give stretches of at least 4 h to count as availability).
	pol := api.MaintenancePolicy{Window: &api.MaintenanceWindow{
		Start:      time.Date(2026, 11, 1, 2, 0, 0, 0, time.FixedZone("CET", 3600)),
		End:        time.Date(2026, 11, 1, 6, 0, 0, 0, time.FixedZone("CET", 3600)),
		Recurrence: "FREQ=DAILY",
	}}
	put(t, cl, "/v1/clusters/lab/maintenance-policy", pol)
	var stored api.MaintenancePolicy
	_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/maintenance-policy", nil, &stored)
	require.NoError(t, err)
	require.Equal(t, time.UTC, stored.Window.Start.Location(), "stored as UTC")
	require.Equal(t, 1, stored.Window.Start.Hour())

	var check api.MaintenanceCheck
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/maintenance-policy/check?target=nodes&change=patch&at=2026-11-23T06:00:00Z", nil, &check)
	require.NoError(t, err)
	require.False(t, check.Allowed)
	require.Equal(t, []string{"window"}, check.BlockedBy)
	require.Equal(t, time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC), check.NextOpportunity.UTC())
	// Without at, the check judges now on the member's clock (01:30, inside
	// the window), not the wall clock.
	check = api.MaintenanceCheck{}
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/maintenance-policy/check?target=nodes&change=patch", nil, &check)
	require.NoError(t, err)
	require.True(t, check.Allowed, "%+v", check)

	runAgents(ctx, tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)
	release2 := ops.holdCordon("worker-1")
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.33.7", Automatic: true}, nil)
	require.NoError(t, err)

	eventually(t, "worker-1 cordon in progress", func() bool { return ops.called("cordon worker-1") })
	clock.Set(night.Add(4 * time.Hour)) // 05:30: the window has closed
	release2()
	eventually(t, "pause recorded after worker-1 finished", func() bool {
		u, err := m.c.Upgrade("lab")
		if err != nil {
			return false
		}
		w1, _ := u.Node("worker-1")
		return u.PauseReason == string(maintenance.PauseMaintenanceWindow) && w1.State == phases.StateDone
	})
	u, err := m.c.Upgrade("lab")
	require.NoError(t, err)
	w2, _ := u.Node("worker-2")
	require.Equal(t, phases.StatePending, w2.State, "nothing new starts outside the window")
	require.False(t, ops.called("cordon worker-2"))
	check = api.MaintenanceCheck{}
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/maintenance-policy/check?target=nodes&change=patch", nil, &check)
	require.NoError(t, err)
	require.False(t, check.Allowed, "05:30 on the member's clock is outside the window")

	clock.Set(time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)) // next night
	eventually(t, "upgrade done in the next window", func() bool {
		u, err := m.c.Upgrade("lab")
		return err == nil && u.State == phases.UpgradeDone
	})
	u, _ = m.c.Upgrade("lab")
	require.Empty(t, u.PauseReason)
	w2, _ = u.Node("worker-2")
	require.False(t, w2.StartedAt.Before(time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)), "worker-2 started in the next window")
}

// TestManualUpgradeIgnoresWindowAndEmergencyNeedsReason checks that manual
// upgrades are not gated, that an invalid policy is refused naming its rule
// without changing the stored one, and the emergency override's rules.
func TestManualUpgradeIgnoresWindowAndEmergencyNeedsReason(t *testing.T) {
	ops := newFakeOps()
	clock := clock.NewManual(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	m := startMemberAt(t, "m1", t.TempDir(), true, ops, "", "127.0.0.1:0", clock)
	tc := &testCluster{t: t, members: []*member{m}, ops: ops}
	tc.waitLeader()
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.33.7", release("1.33.7"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	spec := clusterSpec("lab", "1.33.6")
	put(t, cl, "/v1/clusters/lab", spec)
	good := api.MaintenancePolicy{Window: &api.MaintenanceWindow{Start: time.Date(2026, 11, 1, 1, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC), Recurrence: "FREQ=DAILY"}}
	put(t, cl, "/v1/clusters/lab/maintenance-policy", good)

	bad := good
	bad.Exclusions = []api.MaintenanceExclusion{{Name: "sales", Start: clock.Now(), End: clock.Now().Add(40 * 24 * time.Hour)}}
	code, prob, _ := raw(t, m, http.MethodPut, "/v1/clusters/lab/maintenance-policy", "application/json", mustJSON(t, bad))
	require.Equal(t, 422, code)
	require.Equal(t, api.ProblemTypeBase+api.ProblemPolicyInvalid, prob.Type)
	require.Equal(t, maintenance.RuleMaintenanceAvailability, prob.Rule)
	got, err := m.c.Policy("lab")
	require.NoError(t, err)
	require.Empty(t, got.Exclusions, "a refused policy leaves the stored one unchanged")

	// Emergency: reason required; patches only.
	code, prob, _ = raw(t, m, http.MethodPost, "/v1/clusters/lab/upgrade", "application/json", []byte(`{"version":"1.33.7","automatic":true,"emergency":{"reason":""}}`))
	require.Equal(t, 422, code)
	require.Equal(t, "override-reason-required", prob.Rule)
	code, prob, _ = raw(t, m, http.MethodPost, "/v1/clusters/lab/upgrade", "application/json", []byte(`{"version":"1.34.4","automatic":true,"emergency":{"reason":"CVE"}}`))
	require.Equal(t, 422, code)
	require.Equal(t, "emergency-patch-only", prob.Rule)

	// A manual upgrade at noon (outside the window) runs at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runAgents(ctx, tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.33.7"}, nil)
	require.NoError(t, err)
	eventually(t, "manual upgrade done outside the window", func() bool {
		u, err := m.c.Upgrade("lab")
		return err == nil && u.State == phases.UpgradeDone
	})

	// An automatic emergency patch also runs through the closed window,
	// and the override is in the audit log with its reason and the
	// authenticated caller, not the name the request states.
	put(t, cl, "/v1/releases/1.33.8", release("1.33.8"))
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.33.8", Automatic: true, Emergency: &api.Emergency{Reason: "CVE-2026-1234", By: "oncall"}}, nil)
	require.NoError(t, err)
	eventually(t, "emergency patch done outside the window", func() bool {
		u, err := m.c.Upgrade("lab")
		return err == nil && u.State == phases.UpgradeDone && u.To.Patch == 8
	})
	u, err := m.c.Upgrade("lab")
	require.NoError(t, err)
	require.Equal(t, "CVE-2026-1234", u.Options.EmergencyReason, "the stated name is not part of the reason")
	found := 0
	for _, e := range m.c.AuditLog(api.AuditQuery{Cluster: "lab", Limit: 1000}).Entries {
		require.NotContains(t, e.Principal+e.Detail+e.Reason, "oncall")
		if e.Reason != "" {
			found++
			require.Equal(t, "CVE-2026-1234", e.Reason)
			require.Equal(t, "token:"+testAdminRec.ID+" (bootstrap admin)", e.Principal)
			require.Equal(t, "admin", e.Role)
			require.Equal(t, 202, e.Status)
			require.Contains(t, e.Detail, "1.33.7 → 1.33.8, automatic, emergency override")
		}
	}
	require.Equal(t, 1, found)
}
