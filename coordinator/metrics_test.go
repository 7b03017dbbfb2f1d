package coordinator_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// scrape returns the lines of /metrics that start with prefix.
func scrape(t *testing.T, m *member, prefix string) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+m.addr+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testAdmin)
	resp, err := httpsClient(nil).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestMetricsFollowUpgrade scrapes /metrics while a scripted upgrade runs
// and sees the step and phase metrics move: control plane running while
// the workers wait, then everything done.
func TestMetricsFollowUpgrade(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops)
	m := tc.members[0]
	cl := m.client()
	spec := registerLab(t, cl)
	require.Contains(t, scrape(t, m, "molt_cluster_upgrade_phase"), `molt_cluster_upgrade_phase{cluster="lab",phase="idle"} 1`)
	require.Contains(t, scrape(t, m, "molt_cluster_nodes"), `molt_cluster_nodes{cluster="lab",version="1.33.6"} 7`)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hold := ops.holdCordon("cp-2")
	runAgents(ctx, tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	eventually(t, "cp-2 held at cordon", func() bool { return ops.called("cordon cp-2") })

	got := scrape(t, m, "molt_")
	require.Contains(t, got, `molt_cluster_upgrade_phase{cluster="lab",phase="running"} 1`)
	require.Contains(t, got, `molt_upgrade_step_state{cluster="lab",state="done",step="pool/cplb"} 1`)
	require.Contains(t, got, `molt_upgrade_step_state{cluster="lab",state="running",step="pool/cp"} 1`)
	require.Contains(t, got, `molt_upgrade_step_state{cluster="lab",state="pending",step="pool/workers"} 1`)
	require.Contains(t, got, `molt_pool_nodes{cluster="lab",pool="cp",state="upgrading"} 1`)
	require.Contains(t, got, `molt_pool_nodes{cluster="lab",pool="cp",state="done"} 1`)
	require.Contains(t, got, `molt_cluster_nodes{cluster="lab",version="1.34.4"} 2`)
	require.Contains(t, got, `molt_raft_has_leader 1`)

	hold()
	eventually(t, "upgrade done", func() bool {
		for _, l := range scrape(t, m, "molt_cluster_upgrade_phase") {
			if l == `molt_cluster_upgrade_phase{cluster="lab",phase="done"} 1` {
				return true
			}
		}
		return false
	})
	got = scrape(t, m, "molt_")
	require.Contains(t, got, `molt_upgrade_step_state{cluster="lab",state="done",step="health"} 1`)
	require.Contains(t, got, `molt_cluster_nodes{cluster="lab",version="1.34.4"} 7`)
	require.Contains(t, got, `molt_node_upgrades_total{cluster="lab",pool="workers",result="succeeded"} 2`)
	require.Contains(t, got, `molt_cluster_info{cluster="lab",target_version="1.34.4",version="1.34.4"} 1`)
}
