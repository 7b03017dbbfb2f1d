package coordinator_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/phases"
)

// TestRolloutSequenceSecondStageAfterSoak runs a two-stage rollout
// sequence over two clusters on an in-process member with simulated
// agents and an injected clock: bad sequences are refused naming their
// rule and store nothing; once the channel targets 1.33.7 the dev cluster
// is upgraded at once while prod waits, its upgrade-status naming the
// stage, then dev's soak end; the sequence's status, the metrics and the
// status say the same; nothing starts on prod before the soak ends, and
// it starts once the clock reaches it. Resumes and skips are role-checked,
// audited with their reason, and refused for an unknown stage or version;
// a deleted sequence is gone.
func TestRolloutSequenceSecondStageAfterSoak(t *testing.T) {
	ops := newFakeOps()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clk := clock.NewManual(t0)
	// The clock jumps days ahead: agents are missing until they beat
	// again, and must not be once it moves on by a minute.
	m := startMemberAt(t, "m1", t.TempDir(), true, ops, "", "127.0.0.1:0", clk, func(c *coordinator.Config) { c.MissingAfter = 5 * time.Minute })
	tc := &testCluster{t: t, members: []*member{m}, ops: ops}
	tc.waitLeader()
	cl := m.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.33.7", release("1.33.7"))
	for _, name := range []string{"dev", "prod"} {
		spec := clusterSpec(name, "1.33.6")
		spec.Channel = "regular"
		spec.MaintenancePolicy = &api.MaintenancePolicy{} // any time
		spec.Labels = map[string]string{"tier": name}
		put(t, cl, "/v1/clusters/"+name, spec)
		runAgents(ctx, tc, name, nodeNames(spec))
		waitAgents(t, tc, name, 7)
	}

	// Refusals name their rule and store nothing.
	const soak = 72 * time.Hour
	good := api.RolloutSequenceSpec{Stages: []api.SequenceStage{
		{Name: "dev", Clusters: []string{"dev"}, Soak: "72h"},
		{Name: "prod", Selector: map[string]string{"tier": "prod"}},
	}}
	for _, c := range []struct {
		name, rule string
		spec       api.RolloutSequenceSpec
	}{
		{"Fleet", statemachine.RuleSequenceName, good},
		{"fleet", statemachine.RuleSequenceStages, api.RolloutSequenceSpec{}},
		{"fleet", statemachine.RuleSequenceStages, api.RolloutSequenceSpec{Stages: []api.SequenceStage{{Name: "dev"}}}},
		{"fleet", statemachine.RuleSequenceStages, api.RolloutSequenceSpec{Stages: []api.SequenceStage{{Name: "dev", Clusters: []string{"dev"}, Soak: "-1s"}}}},
		{"fleet", statemachine.RuleSequenceStages, api.RolloutSequenceSpec{Stages: []api.SequenceStage{{Name: "dev", Clusters: []string{"dev"}, Soak: "three days"}}}},
		{"fleet", coordinator.RuleSequenceSelector, api.RolloutSequenceSpec{Stages: []api.SequenceStage{{Name: "dev", Selector: map[string]string{"bad key": "x"}}}}},
		{"fleet", statemachine.RuleClusterInTwoStages, api.RolloutSequenceSpec{Stages: []api.SequenceStage{
			{Name: "dev", Clusters: []string{"dev"}}, {Name: "all", Selector: map[string]string{"tier": "dev"}}}}},
	} {
		_, err := cl.Do(ctx, http.MethodPut, "/v1/rollout-sequences/"+c.name, c.spec, nil)
		require.Equal(t, http.StatusUnprocessableEntity, problemStatus(err), "%+v: %v", c.spec, err)
		require.Equal(t, c.rule, problemRule(err), "%+v: %v", c.spec, err)
	}
	var seqs []api.RolloutSequence
	_, err := cl.Do(ctx, http.MethodGet, "/v1/rollout-sequences", nil, &seqs)
	require.NoError(t, err)
	require.Empty(t, seqs, "a refusal stores nothing")

	// Only an admin stores a sequence.
	operator, _ := tokenClient(t, cl, m.addr, "operator", "on call")
	_, err = operator.Do(ctx, http.MethodPut, "/v1/rollout-sequences/fleet", good, nil)
	require.Equal(t, http.StatusForbidden, problemStatus(err), "%v", err)
	var seq api.RolloutSequence
	_, err = cl.Do(ctx, http.MethodPut, "/v1/rollout-sequences/fleet", good, &seq)
	require.NoError(t, err)
	require.Equal(t, "259200s", seq.Stages[0].Soak)
	_, err = cl.Do(ctx, http.MethodPut, "/v1/rollout-sequences/other", api.RolloutSequenceSpec{Stages: []api.SequenceStage{{Name: "all", Clusters: []string{"prod"}}}}, nil)
	require.Equal(t, statemachine.RuleClusterInTwoSequences, problemRule(err), "%v", err)

	// The plan of 1.33.7: dev at once, prod after dev's soak.
	var plan api.SequencePlan
	_, err = cl.Do(ctx, http.MethodGet, "/v1/rollout-sequences/fleet/plan?version=1.33.7", nil, &plan)
	require.NoError(t, err)
	require.Len(t, plan.Stages, 2)
	require.Equal(t, t0, plan.Stages[0].Opens.UTC())
	require.Equal(t, plan.Stages[0].Done.Add(soak), plan.Stages[1].Opens)
	require.Equal(t, []string{"dev", "prod"}, []string{plan.Clusters[0].Cluster, plan.Clusters[1].Cluster})
	require.Equal(t, plan.Clusters[1].Finish, plan.Finish)
	require.Empty(t, plan.Stopped)
	_, err = cl.Do(ctx, http.MethodGet, "/v1/rollout-sequences/fleet/plan?version=latest", nil, nil)
	require.Equal(t, phases.RuleInvalid, problemRule(err), "%v", err)

	// The target moves: dev starts at once; prod waits for stage dev.
	_, err = cl.Do(ctx, http.MethodPut, "/v1/channels/regular", api.ChannelUpdate{AutoUpgradeTarget: "1.33.7"}, nil)
	require.NoError(t, err)
	eventually(t, "dev upgraded to 1.33.7", func() bool {
		u, err := getUpgrade(ctx, cl, "dev")
		return err == nil && u.Options.Automatic && u.State == phases.UpgradeDone
	})
	dev, err := getUpgrade(ctx, cl, "dev")
	require.NoError(t, err)
	soakEnds := dev.FinishedAt.Add(soak)
	var st api.UpgradeStatus
	eventually(t, "prod waits for dev's soak", func() bool {
		st = upgradeStatus(t, ctx, cl, "prod")
		return st.Sequence != nil && st.Sequence.NotReached == nil
	})
	require.Equal(t, api.AutoWaitingForStage, st.State, st.Message)
	require.Equal(t, &api.SequenceWait{Sequence: "fleet", Stage: "prod", Version: "1.33.7", WaitsFor: "dev", SoakEnds: soakEnds}, st.Sequence)
	require.Equal(t, api.BlockSequence, st.BlockedBy[0].Kind)
	require.Equal(t, soakEnds, st.BlockedBy[0].Until.UTC())
	_, err = getUpgrade(ctx, cl, "prod")
	require.Error(t, err, "prod has not started")

	_, err = cl.Do(ctx, http.MethodGet, "/v1/rollout-sequences/fleet", nil, &seq)
	require.NoError(t, err)
	require.Len(t, seq.Versions, 1)
	v := seq.Versions[0]
	require.Equal(t, "1.33.7", v.Version)
	require.Equal(t, 0, v.Reached, "dev has not soaked yet")
	require.Equal(t, "dev", v.Stage)
	require.Equal(t, api.SequenceStageRun{Name: "dev", Clusters: []string{"dev"}, ReachedAt: dev.FinishedAt, SoakEnds: soakEnds, Open: true}, v.Stages[0])
	require.Equal(t, []string{"prod"}, v.Stages[1].NotReached)
	require.False(t, v.Stages[1].Open)
	require.Equal(t, []string{`molt_rollout_sequence_stage{sequence="fleet",version="1.33.7"} 0`}, scrape(t, m, "molt_rollout_sequence_stage"))
	require.Len(t, scrape(t, m, "molt_rollout_sequence_soak_end_timestamp_seconds"), 1)

	// A minute before the soak ends nothing starts on prod; at its end,
	// prod is upgraded.
	clk.Set(soakEnds.Add(-time.Minute))
	eventually(t, "prod's agents seen again after the jump", func() bool {
		c, err := m.c.Cluster("prod")
		if err != nil {
			return false
		}
		n := 0
		for _, a := range c.Status.Agents {
			if !a.Missing && !a.LastSeen.Before(soakEnds.Add(-time.Minute)) {
				n++
			}
		}
		return n == 7
	})
	st = upgradeStatus(t, ctx, cl, "prod")
	require.Equal(t, api.AutoWaitingForStage, st.State, "a minute before the soak's end: %s", st.Message)
	clk.Set(soakEnds)
	eventually(t, "prod upgraded to 1.33.7", func() bool {
		u, err := getUpgrade(ctx, cl, "prod")
		return err == nil && u.Options.Automatic && u.State == phases.UpgradeDone
	})
	prod, err := getUpgrade(ctx, cl, "prod")
	require.NoError(t, err)
	require.False(t, prod.CreatedAt.Before(soakEnds), "prod started %s, before dev's soak ended %s", prod.CreatedAt, soakEnds)
	eventually(t, "the version through both stages", func() bool {
		return slices.Equal(scrape(t, m, "molt_rollout_sequence_stage"), []string{`molt_rollout_sequence_stage{sequence="fleet",version="1.33.7"} 2`})
	})

	// Resume and skip: an operator's, audited with the reason; refused
	// for a viewer, an unknown stage, a version not in the catalog.
	viewer, _ := tokenClient(t, cl, m.addr, "viewer", "dashboard")
	_, err = viewer.Do(ctx, http.MethodPost, "/v1/rollout-sequences/fleet/stages/dev/resume", api.SequenceOverrideRequest{Version: "1.33.7"}, nil)
	require.Equal(t, http.StatusForbidden, problemStatus(err), "%v", err)
	_, err = operator.Do(ctx, http.MethodPost, "/v1/rollout-sequences/fleet/stages/qa/skip", api.SequenceOverrideRequest{Version: "1.33.7"}, nil)
	require.Equal(t, statemachine.RuleSequenceStageUnknown, problemRule(err), "%v", err)
	_, err = operator.Do(ctx, http.MethodPost, "/v1/rollout-sequences/fleet/stages/dev/skip", api.SequenceOverrideRequest{Version: "1.40.0"}, nil)
	require.Equal(t, statemachine.RuleSequenceOverride, problemRule(err), "%v", err)
	_, err = operator.Do(ctx, http.MethodPost, "/v1/rollout-sequences/fleet/stages/dev/resume", api.SequenceOverrideRequest{Version: "1.33.7", Reason: "flake in dev, INC-42"}, &seq)
	require.NoError(t, err)
	require.Len(t, seq.Overrides, 1)
	require.Equal(t, api.SequenceOverride{Version: "1.33.7", Stage: "dev", Action: api.SequenceResume, Reason: "flake in dev, INC-42", At: soakEnds}, seq.Overrides[0])
	var page api.AuditPage
	_, err = cl.Do(ctx, http.MethodGet, "/v1/audit", nil, &page)
	require.NoError(t, err)
	var resumed *api.AuditEntry
	for i := range page.Entries {
		if e := &page.Entries[i]; strings.HasSuffix(e.Path, "/stages/dev/resume") && e.Status == http.StatusOK {
			resumed = e
		}
	}
	require.NotNil(t, resumed, "the resume is in the audit log")
	require.Equal(t, "flake in dev, INC-42", resumed.Reason)
	require.Equal(t, "operator", resumed.Role)

	_, err = operator.Do(ctx, http.MethodDelete, "/v1/rollout-sequences/fleet", nil, nil)
	require.Equal(t, http.StatusForbidden, problemStatus(err), "%v", err)
	_, err = cl.Do(ctx, http.MethodDelete, "/v1/rollout-sequences/fleet", nil, nil)
	require.NoError(t, err)
	_, err = cl.Do(ctx, http.MethodGet, "/v1/rollout-sequences/fleet", nil, nil)
	require.Equal(t, http.StatusNotFound, problemStatus(err), "%v", err)
}
