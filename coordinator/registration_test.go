package coordinator_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/maintenance"
)

// automaticUpgradeOf waits for an automatic upgrade of cluster.
func automaticUpgradeOf(t *testing.T, ctx context.Context, cl *client.Client, cluster string) {
	t.Helper()
	eventually(t, "an automatic upgrade of "+cluster, func() bool {
		u, err := getUpgrade(ctx, cl, cluster)
		return err == nil && u.Options.Automatic
	})
}

// TestRegistrationCarriesThePolicyOrIsHeld registers clusters on channel
// regular, whose target is ahead of them, on an injected clock. Without a
// policy a cluster is held: the scheduler starts nothing on it (proven by
// a cluster registered after it, with an "any time" policy, being
// started), its status names the hold and its end, and it starts once the
// clock reaches that end. A policy given with the registration rules the
// first pass: a cluster registered during a no_upgrades exclusion starts
// nothing. A bad policy refuses the registration, naming its rule, and
// stores nothing.
func TestRegistrationCarriesThePolicyOrIsHeld(t *testing.T) {
	ops := newFakeOps()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC) // a Monday
	clock := clock.NewManual(now)
	m := startMemberAt(t, "m1", t.TempDir(), true, ops, "", "127.0.0.1:0", clock)
	tc := &testCluster{t: t, members: []*member{m}, ops: ops}
	tc.waitLeader()
	cl := m.client()
	ctx := t.Context()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.33.7", release("1.33.7"))
	put(t, cl, "/v1/channels/regular", api.ChannelUpdate{AutoUpgradeTarget: "1.33.7"})
	onRegular := func(name string, p *api.MaintenancePolicy) api.ClusterSpec {
		s := clusterSpec(name, "1.33.6")
		s.Channel, s.MaintenancePolicy = "regular", p
		return s
	}

	// Held: lab has no policy. probe, registered after it with an "any
	// time" policy, is started by a pass that saw lab too.
	put(t, cl, "/v1/clusters/lab", onRegular("lab", nil))
	put(t, cl, "/v1/clusters/probe", onRegular("probe", &api.MaintenancePolicy{}))
	automaticUpgradeOf(t, ctx, cl, "probe")
	_, err := getUpgrade(ctx, cl, "lab")
	require.Equal(t, http.StatusConflict, problemStatus(err), "nothing started on lab: %v", err)
	until := now.Add(coordinator.DefaultRegistrationHold)
	st := upgradeStatus(t, ctx, cl, "lab")
	require.Equal(t, api.AutoBlockedByRule, st.State, st.Message)
	require.Equal(t, []api.UpgradeBlock{{Kind: api.BlockRule, Name: "registration-hold", Until: until, Detail: st.BlockedBy[0].Detail}}, st.BlockedBy)
	require.Equal(t, until, st.NextOpportunity.UTC())
	require.Equal(t, "1.33.7", st.Next)

	// The policy given with the registration is in force from the first
	// pass: shop, registered during its sale, starts nothing, while
	// probe2, registered after it, is started.
	sale := &api.MaintenancePolicy{Exclusions: []api.MaintenanceExclusion{{Name: "sale", Start: now.Add(-time.Hour), End: now.Add(3 * 24 * time.Hour)}}}
	put(t, cl, "/v1/clusters/shop", onRegular("shop", sale))
	put(t, cl, "/v1/clusters/probe2", onRegular("probe2", &api.MaintenancePolicy{}))
	automaticUpgradeOf(t, ctx, cl, "probe2")
	_, err = getUpgrade(ctx, cl, "shop")
	require.Equal(t, http.StatusConflict, problemStatus(err), "nothing started on shop: %v", err)
	st = upgradeStatus(t, ctx, cl, "shop")
	require.Equal(t, api.AutoBlockedExclusion, st.State, st.Message)
	require.Equal(t, "sale", st.BlockedBy[0].Name)
	var stored api.MaintenancePolicy
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/shop/maintenance-policy", nil, &stored)
	require.NoError(t, err)
	require.Equal(t, string(maintenance.ScopeNoUpgrades), stored.Exclusions[0].Scope)

	// A bad policy: refused naming its rule; the cluster is not there.
	bad := onRegular("bad", &api.MaintenancePolicy{Exclusions: []api.MaintenanceExclusion{{Name: "x", Start: now.Add(time.Hour), End: now}}})
	code, prob, _ := raw(t, m, http.MethodPut, "/v1/clusters/bad", "application/json", mustJSON(t, bad))
	require.Equal(t, 422, code)
	require.Equal(t, api.ProblemTypeBase+api.ProblemPolicyInvalid, prob.Type)
	require.Equal(t, maintenance.RuleExclusionEndBeforeStart, prob.Rule)
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/bad", nil, nil)
	require.Equal(t, http.StatusNotFound, problemStatus(err), "nothing stored: %v", err)

	// At the hold's end lab starts by itself.
	clock.Set(until)
	automaticUpgradeOf(t, ctx, cl, "lab")
}
