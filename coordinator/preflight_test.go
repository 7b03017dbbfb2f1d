package coordinator_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/preflight"
)

// TestPreflightRunAndUpgradeRefusal runs a preflight alone, then shows an
// upgrade refused by a blocking failure (one agent stopped) leaving spec,
// status and every node untouched.
func TestPreflightRunAndUpgradeRefusal(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops)
	m := tc.members[0]
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	spec := clusterSpec("lab", "1.33.6")
	put(t, cl, "/v1/clusters/lab", spec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodes := nodeNames(spec)
	startAgents(ctx, tc, "lab", nodes, true)
	waitAgents(t, tc, "lab", len(nodes))

	// A preflight alone: 202 with its ID, then a passing report.
	var run coordinator.PreflightRun
	code, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/preflight", map[string]string{"version": "1.34.4"}, &run)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "lab-1", run.ID)
	eventually(t, "preflight done", func() bool {
		run = coordinator.PreflightRun{}
		_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/preflight/lab-1", nil, &run)
		return err == nil && run.State == "done"
	})
	require.Equal(t, preflight.Passed, run.Report.Verdict, "%+v", run.Report.Results)
	require.Len(t, run.Report.Results, len(preflight.Checks()))
	for _, n := range nodes {
		require.Len(t, run.Operations[n], 2, "artifacts and peers on %s", n)
	}

	// A new cluster whose worker-2 agent never runs: the upgrade is refused.
	spec2 := clusterSpec("lab2", "1.33.6")
	put(t, cl, "/v1/clusters/lab2", spec2)
	startAgents(ctx, tc, "lab2", nodes[:len(nodes)-1], true)
	eventually(t, "agents registered", func() bool {
		c, err := m.c.Cluster("lab2")
		return err == nil && len(c.Status.Agents) == len(nodes)-1
	})
	before := snapshot(t, cl)
	calls := len(ops.Calls())
	code2, prob, body := raw(t, m, http.MethodPost, "/v1/clusters/lab2/upgrade", "application/json", []byte(`{"version":"1.34.4"}`))
	require.Equal(t, http.StatusConflict, code2, string(body))
	require.Equal(t, api.ProblemTypeBase+api.ProblemPreflightFailed, prob.Type)
	require.Contains(t, prob.Extra["failed"], preflight.IDAgentsReporting)
	require.Contains(t, prob.Detail, "agents-reporting")
	require.Equal(t, before, snapshot(t, cl), "spec and status untouched")
	require.Equal(t, calls, len(ops.Calls()), "no node touched")
	c2, err := m.c.Cluster("lab2")
	require.NoError(t, err)
	require.Nil(t, c2.Status.Upgrade)
	require.Equal(t, "1.33.6", c2.Spec.Version.String())
}
