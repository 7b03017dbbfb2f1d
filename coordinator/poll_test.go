package coordinator_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// TestPollNamesTheUpgrade: an agent's poll answer names the cluster's
// upgrade in progress ("" for none) and each operation the upgrade it
// belongs to: none for a preflight run on its own, the upgrade for the
// run it waits for and for its node steps. Once the upgrade is done the
// answers name none, which is what tells agents to empty their artifact
// stage.
func TestPollNamesTheUpgrade(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops)
	cl := tc.members[0].client()
	nodes := nodeNames(registerLab(t, cl))
	ctx := t.Context()
	agents := runAgents(ctx, tc, "lab", nodes)
	waitAgents(t, tc, "lab", len(nodes))

	var run api.PreflightRun
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/preflight", map[string]string{"version": "1.34.4"}, &run)
	require.NoError(t, err)
	id := run.ID
	eventually(t, "preflight done", func() bool {
		run = api.PreflightRun{}
		_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/preflight/"+id, nil, &run)
		return err == nil && run.State == "done"
	})
	var u api.Upgrade
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, &u)
	require.NoError(t, err)
	eventually(t, "upgrade done", func() bool {
		var c api.Cluster
		_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab", nil, &c)
		return err == nil && c.Status.Upgrade != nil && c.Status.Upgrade.State == api.UpgradeDone
	})
	for _, n := range nodes {
		a := agents[n]
		eventually(t, n+" told no upgrade is in progress", func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return len(a.upgrades) > 0 && a.upgrades[len(a.upgrades)-1] == ""
		})
		a.mu.Lock()
		nodeSteps := 0
		for id, upgrade := range a.upgradeOf {
			switch {
			case strings.HasPrefix(id, "preflight-"+run.ID+"-"):
				require.Empty(t, upgrade, id)
			case strings.HasPrefix(id, "preflight-"+u.Preflight+"-"):
				require.Equal(t, u.ID, upgrade, id)
			case strings.HasPrefix(id, u.ID+"/"+n+"/"):
				require.Equal(t, u.ID, upgrade, id)
				nodeSteps++
			case strings.HasPrefix(id, u.ID+"/run/backup/"):
				require.Equal(t, "cp-1", n, "the snapshot is taken by the first healthy control-plane host")
				require.Equal(t, u.ID, upgrade, id)
			default:
				t.Errorf("%s: unexpected operation %s", n, id)
			}
		}
		require.Positive(t, nodeSteps, n)
		require.Equal(t, []string{"", u.ID, ""}, slices.Compact(slices.Clone(a.upgrades)),
			"none, then the upgrade from its preflight to its end, then none")
		a.mu.Unlock()
	}
}
