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
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/phases"
)

// upgradeMember serves one upgrade.
type upgradeMember struct {
	UpgradeService
	u *phases.Upgrade
}

func (m *upgradeMember) Upgrade(string) (*phases.Upgrade, error) { return m.u, nil }

// TestUpgradeCarriesForecast: GET .../upgrade answers a running upgrade
// with the forecast made on the member's clock, so clients show the
// coordinator's ETA instead of running the planner themselves; a finished
// upgrade has none.
func TestUpgradeCarriesForecast(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	spec := &phases.ClusterSpec{Name: "lab", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.34.3"),
		Pools: []phases.Pool{{Name: "w", Role: phases.RoleWorker, Nodes: []phases.Node{{Name: "w-1"}, {Name: "w-2"}}}}}
	u := phases.NewUpgrade("lab-1", spec, phases.MustParseVersion("1.34.4"), phases.Options{}, t0)
	now := t0.Add(5 * time.Minute)
	m := &upgradeMember{u: u}
	hs := &upgradeHandlers{svc: m, clock: clock.NewManual(now)}
	r := chi.NewRouter()
	r.Get("/v1/clusters/{name}/upgrade", hs.upgrade)
	get := func() api.Upgrade {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/clusters/lab/upgrade", nil))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var out api.Upgrade
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		return out
	}

	require.Equal(t, phases.UpgradeRunning, u.State)
	got := get()
	require.NotNil(t, got.Forecast)
	require.Equal(t, now, got.Forecast.At)
	require.True(t, got.Forecast.End.After(now), "%v", got.Forecast.End)
	require.Equal(t, convert.UpgradeForecastToAPI(u, now), got.Forecast)

	u.State, u.FinishedAt = phases.UpgradeDone, now
	require.Nil(t, get().Forecast)
}
