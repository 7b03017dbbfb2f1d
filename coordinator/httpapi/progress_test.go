package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/phases"
)

// TestUpgradeCarriesProgress: GET .../upgrade says what the engine reads
// off the upgrade — in progress, why it is failing, the step each running
// or failed node is at — so that moltctl, the e2e tests and the web view
// show progress without importing the engine.
func TestUpgradeCarriesProgress(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	spec := &phases.ClusterSpec{Name: "lab", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.34.3"),
		Pools: []phases.Pool{{Name: "w", Role: phases.RoleWorker, Nodes: []phases.Node{{Name: "w-1"}, {Name: "w-2"}, {Name: "w-3"}}}}}
	u := phases.NewUpgrade("lab-1", spec, phases.MustParseVersion("1.34.4"), phases.Options{}, t0)
	// Midway: w-1 failed at its drain and took the pool past its failure
	// budget, w-2 is at its third step, w-3 has not started.
	p, ok := u.Pool("w")
	require.True(t, ok)
	s, ok := u.Step(phases.PoolStepID("w"))
	require.True(t, ok)
	s.State = phases.StateRunning
	steps := p.StepsOf(&u.Nodes[p.First])
	require.Equal(t, phases.NodeDrain, steps[1].Kind)
	w1, w2 := &u.Nodes[p.First], &u.Nodes[p.First+1]
	w1.State, w1.Cursor, w1.Error = phases.StateFailed, 1, "pdb web/frontend refused eviction"
	w2.State, w2.Cursor = phases.StateRunning, 2
	p.MaxFailedNodes, p.FailReason = 1, "1 of 3 nodes failed, its failure budget is 1 (maxFailedNodes): w-1 (pdb web/frontend refused eviction)"

	hs := &upgradeHandlers{svc: &upgradeMember{u: u}, clock: clock.NewManual(t0.Add(time.Hour))}
	r := chi.NewRouter()
	r.Get("/v1/clusters/{name}/upgrade", hs.upgrade)
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/clusters/lab/upgrade", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var got api.Upgrade
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))

	require.Equal(t, api.UpgradeRunning, got.State)
	require.True(t, got.InProgress)
	require.Equal(t, "pool w: "+p.FailReason, got.Failing)
	byName := map[string]api.NodeTask{}
	for _, n := range got.Nodes {
		byName[n.Node] = n
	}
	require.Equal(t, "drain", byName["w-1"].Step, "where the failed node stopped")
	require.Equal(t, steps[2].String(), byName["w-2"].Step)
	require.Empty(t, byName["w-3"].Step, "a pending node is at no step yet")

	// Done: no longer in progress, nothing failing, no node at a step.
	u.State, u.FinishedAt, u.Pools[0].FailReason = phases.UpgradeDone, t0.Add(time.Hour), ""
	w1.State, w2.State = phases.StateDone, phases.StateDone
	rec = httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/clusters/lab/upgrade", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.NotContains(t, rec.Body.String(), `"inProgress"`)
	require.NotContains(t, rec.Body.String(), `"failing"`)
	require.NotContains(t, rec.Body.String(), `"step"`)
}
