package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moltproject/molt/internal/testenv"
	"github.com/stretchr/testify/require"
)

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(b, &d))
	return d
}

// allPanels flattens rows.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// TestDashboardShape: the datasource and cluster variables exist, panel ids
// are unique, every query panel uses the datasource variable and has a query.
func TestDashboardShape(t *testing.T) {
	d := loadDashboard(t)
	require.NotEmpty(t, d.Title)
	require.NotEmpty(t, d.UID)
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	require.Equal(t, map[string]string{"datasource": "datasource", "cluster": "query"}, vars)

	ids := map[int]bool{}
	queryPanels := 0
	for _, p := range allPanels(d.Panels) {
		require.False(t, ids[p.ID], "duplicate panel id %d", p.ID)
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		queryPanels++
		require.NotNil(t, p.Datasource, p.Title)
		require.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
	}
	require.GreaterOrEqual(t, queryPanels, 15)
}

// TestDashboardReferencesExportedMetrics: every panel and variable query
// names only metrics molt exports (no recording rules: the dashboard must
// work without the rules loaded), and every query on a metric with a
// cluster label honours the cluster variable.
func TestDashboardReferencesExportedMetrics(t *testing.T) {
	d := loadDashboard(t)
	exported := exportedSeries()
	used := map[string]bool{}
	check := func(where, expr string, filtered bool) {
		refs := metricRefs(expr)
		require.NotEmpty(t, refs, "%s: %q reads no molt metric", where, expr)
		for _, ref := range refs {
			m, ok := exported[ref]
			require.True(t, ok, "%s reads %s, which molt does not export", where, ref)
			used[m.Name] = true
			if filtered && slices.Contains(m.Labels, "cluster") {
				require.Contains(t, expr, ref+`{cluster=~"$cluster"`, "%s: %s ignores the cluster variable", where, ref)
			}
		}
	}
	for _, p := range allPanels(d.Panels) {
		for i, tg := range p.Targets {
			check(fmt.Sprintf("panel %q target %d", p.Title, i), tg.Expr, true)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			check("variable "+v.Name, v.Definition, false) // it lists the clusters
		}
	}
	// The dashboard covers what the brief asks of it.
	for _, name := range []string{ClusterUpgradePhase, UpgradeStepState, ClusterNodes, PoolNodes,
		DrainDuration, DrainTimeoutsTotal, AgentLastSeenAge, RaftState, RaftTerm} {
		require.True(t, used[name], "dashboard shows no %s", name)
	}
}

// TestDashboardQueriesParse hands every panel query to promtool as a
// recording rule, Grafana's variables replaced by values, so a PromQL
// syntax error fails here rather than as an empty panel.
func TestDashboardQueriesParse(t *testing.T) {
	promtool := testenv.RequireBinary(t, "promtool")
	d := loadDashboard(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$cluster", ".*")
	n := 0
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			q, err := json.Marshal(vars.Replace(tg.Expr)) // a JSON string is a valid YAML scalar
			require.NoError(t, err)
			fmt.Fprintf(&b, "      - record: dashboard_query_%d\n        expr: %s\n", n, q)
			n++
		}
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	out, err := exec.CommandContext(t.Context(), promtool, "check", "rules", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
}
