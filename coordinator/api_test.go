package coordinator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/phases"
)

// raw sends a request as bytes and returns status and problem (if any).
func raw(t *testing.T, m *member, method, path, contentType string, body []byte) (int, *api.Problem, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "https://"+m.addr+path, bytes.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+testAdmin)
	resp, err := httpsClient(nil).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode >= 300 {
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), buf.String())
		var p api.Problem
		require.NoError(t, json.Unmarshal(buf.Bytes(), &p))
		return resp.StatusCode, &p, buf.Bytes()
	}
	return resp.StatusCode, nil, buf.Bytes()
}

// snapshot is the observable state: bad input must leave it unchanged.
func snapshot(t *testing.T, cl *client.Client) string {
	var cs []api.Cluster
	var rs []api.Release
	_, err := cl.Do(context.Background(), http.MethodGet, "/v1/clusters", nil, &cs)
	require.NoError(t, err)
	for i := range cs {
		cs[i].Status.Agents = nil // liveness moves on its own
	}
	_, err = cl.Do(context.Background(), http.MethodGet, "/v1/releases", nil, &rs)
	require.NoError(t, err)
	b, _ := json.Marshal([]any{cs, rs})
	return string(b)
}

func TestAPI(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps())
	m := tc.members[0]
	cl := m.client()
	ctx := context.Background()

	// Health, readiness, metrics.
	for _, p := range []string{"/healthz", "/readyz"} {
		code, prob, _ := raw(t, m, http.MethodGet, p, "", nil)
		require.Equal(t, 200, code, "%s %v", p, prob)
	}

	// Releases.
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	put(t, cl, "/v1/releases/1.34.5", release("1.34.5"))
	put(t, cl, "/v1/releases/1.36.0", release("1.36.0"))
	var rel api.Release
	_, err := cl.Do(ctx, http.MethodGet, "/v1/releases/1.34.4", nil, &rel)
	require.NoError(t, err)
	require.Equal(t, "1.34.4", rel.Version)
	var rels []api.Release
	_, err = cl.Do(ctx, http.MethodGet, "/v1/releases", nil, &rels)
	require.NoError(t, err)
	require.Len(t, rels, 4)
	require.Equal(t, "1.33.6", rels[0].Version)

	// Clusters: an admin and its user cluster, plus the lab cluster.
	admin := clusterSpec("admin", "1.34.4")
	admin.Kind = api.ClusterAdmin
	put(t, cl, "/v1/clusters/admin", admin)
	user := clusterSpec("user1", "1.33.6")
	user.Kind, user.AdminCluster = api.ClusterUser, "admin"
	put(t, cl, "/v1/clusters/user1", user)
	put(t, cl, "/v1/clusters/lab", clusterSpec("lab", "1.33.6"))
	var got api.Cluster
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab", nil, &got)
	require.NoError(t, err)
	require.Equal(t, "1.33.6", got.Status.Version)
	require.Empty(t, got.Spec.Kubeconfig, "kubeconfig is never returned")
	require.Equal(t, map[string]int{"1.33.6": 3}, got.Status.ControlPlaneNodepoolStatus.Versions)
	var list []api.Cluster
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters", nil, &list)
	require.NoError(t, err)
	require.Len(t, list, 3)

	agentsCtx, stopAgents := context.WithCancel(ctx)
	defer stopAgents()
	startAgents(agentsCtx, tc, "lab", nodeNames(clusterSpec("lab", "1.33.6")), true)
	waitAgents(t, tc, "lab", 7)

	// Members.
	var ms []api.Member
	_, err = cl.Do(ctx, http.MethodGet, "/v1/members", nil, &ms)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.True(t, ms[0].Leader)
	require.Equal(t, m.addr, ms[0].HTTPAddr)

	before := snapshot(t, cl)
	refusals := []struct {
		name, method, path, ctype, body string
		status                          int
		suffix, rule                    string
	}{
		{"skipped minor", "POST", "/v1/clusters/lab/upgrade", "application/json", `{"version":"1.36.0"}`, 422, api.ProblemVersionSkipMinor, phases.RuleSkipMinor},
		{"downgrade", "POST", "/v1/clusters/admin/upgrade", "application/json", `{"version":"1.33.6"}`, 422, api.ProblemVersionDowngrade, phases.RuleDowngrade},
		{"unknown version", "POST", "/v1/clusters/lab/upgrade", "application/json", `{"version":"1.34.9"}`, 422, api.ProblemVersionUnknown, phases.RuleUnknown},
		{"admin skew", "POST", "/v1/clusters/admin/upgrade", "application/json", `{"version":"1.35.0"}`, 422, api.ProblemVersionUnknown, phases.RuleUnknown},
		{"user ahead of admin", "POST", "/v1/clusters/user1/upgrade", "application/json", `{"version":"1.34.5"}`, 422, api.ProblemAdminSkew, phases.RuleUserAhead},
		{"invalid version", "POST", "/v1/clusters/lab/upgrade", "application/json", `{"version":"banana"}`, 422, api.ProblemVersionInvalid, phases.RuleInvalid},
		{"signed version", "POST", "/v1/clusters/lab/upgrade", "application/json", `{"version":"1.+34.4"}`, 422, api.ProblemVersionInvalid, phases.RuleInvalid},
		{"spaced release version", "PUT", "/v1/releases/1.36.14", "application/json", `{"version":" 1.36.14"}`, 422, api.ProblemVersionInvalid, phases.RuleInvalid},
		{"signed release path", "PUT", "/v1/releases/1.-0.12", "application/json", `{}`, 422, api.ProblemVersionInvalid, phases.RuleInvalid},
		{"signed release read", "GET", "/v1/releases/+1.36.13", "", ``, 422, api.ProblemVersionInvalid, phases.RuleInvalid},
		{"unknown field", "POST", "/v1/clusters/lab/upgrade", "application/json", `{"version":"1.34.4","force":true}`, 400, api.ProblemValidation, "request-body"},
		{"trailing data", "POST", "/v1/clusters/lab/upgrade", "application/json", `{"version":"1.34.4"} {}`, 400, api.ProblemValidation, "request-body"},
		{"wrong media type", "POST", "/v1/clusters/lab/upgrade", "text/plain", `{"version":"1.34.4"}`, 415, api.ProblemUnsupportedMedia, "content-type"},
		{"oversized body", "PUT", "/v1/clusters/big", "application/json", `{"name":"big","pad":"` + strings.Repeat("x", 9<<20) + `"}`, 413, api.ProblemBodyTooLarge, "request-body"},
		{"not found cluster", "GET", "/v1/clusters/nope", "", ``, 404, api.ProblemNotFound, ""},
		{"not found route", "GET", "/v1/nothing", "", ``, 404, api.ProblemNotFound, ""},
		{"wrong method", "PATCH", "/v1/clusters/lab", "application/json", `{}`, 405, api.ProblemMethodNotAllowed, ""},
		{"malformed cluster version", "PUT", "/v1/clusters/bad", "application/json", `{"kind":"standalone","version":"banana","pools":[]}`, 422, api.ProblemVersionInvalid, phases.RuleInvalid},
		{"invalid cluster", "PUT", "/v1/clusters/bad", "application/json", `{"kind":"edge","version":"1.33.6","pools":[]}`, 422, api.ProblemValidation, "cluster-kind"},
		{"name mismatch", "PUT", "/v1/clusters/lab", "application/json", `{"name":"other","kind":"standalone","version":"1.33.6","pools":[]}`, 422, api.ProblemValidation, "cluster-name"},
		{"release mismatch", "PUT", "/v1/releases/1.34.4", "application/json", `{"version":"1.34.5"}`, 422, api.ProblemValidation, "release-version"},
		{"bad artifact", "PUT", "/v1/releases/1.37.0", "application/json", `{"version":"1.37.0","components":{"kubelet":{"url":"ftp://x","sha256":"00"}}}`, 422, api.ProblemValidation, "release-artifact"},
		{"add-on without a manifest", "PUT", "/v1/releases/1.37.0", "application/json", `{"version":"1.37.0","components":{"addons":[{"name":"kube-proxy","yaml":" "}]}}`, 422, api.ProblemValidation, "release-addons"},
		{"add-on twice", "PUT", "/v1/releases/1.37.0", "application/json", `{"version":"1.37.0","components":{"addons":[{"name":"dns","yaml":"a: 1"},{"name":"dns","yaml":"a: 2"}]}}`, 422, api.ProblemValidation, "release-addons"},
		{"no upgrade to cancel", "POST", "/v1/clusters/lab/pools/workers/upgrade/cancel", "application/json", `{}`, 409, api.ProblemNoUpgrade, ""},
		{"an operator registering as an agent", "POST", "/v1/agents/register", "application/json", `{"cluster":"lab","node":"cp-1"}`, 403, api.ProblemForbidden, "role-agent"},
		{"an operator polling an agent's work", "GET", "/v1/agents/admin/cp-1/operations", "", ``, 403, api.ProblemForbidden, "role-agent"},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			code, prob, body := raw(t, m, r.method, r.path, r.ctype, []byte(r.body))
			require.Equal(t, r.status, code, string(body))
			require.Equal(t, api.ProblemTypeBase+r.suffix, prob.Type, string(body))
			require.Equal(t, r.rule, prob.Rule, string(body))
			require.NotEmpty(t, prob.Detail)
			require.Equal(t, before, snapshot(t, cl), "a refused request changed state")
		})
	}

	// Admin skew proper: the admin may not go to 1.35 while user1 is on 1.33.
	put(t, cl, "/v1/releases/1.35.0", release("1.35.0"))
	before = snapshot(t, cl)
	code, prob, _ := raw(t, m, "POST", "/v1/clusters/admin/upgrade", "application/json", []byte(`{"version":"1.35.0"}`))
	require.Equal(t, 422, code)
	require.Equal(t, api.ProblemTypeBase+api.ProblemAdminSkew, prob.Type)
	require.Equal(t, phases.RuleAdminSkew, prob.Rule)
	require.Equal(t, before, snapshot(t, cl))

	// Dry run: 200 with the plan, nothing started.
	var plan api.Plan
	code2, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4", DryRun: true}, &plan)
	require.NoError(t, err)
	require.Equal(t, 200, code2)
	require.Equal(t, "pool/cplb", plan.Steps[0].ID)
	require.Greater(t, plan.Total, plan.CriticalPath/2)
	require.Equal(t, before, snapshot(t, cl), "a dry run changes nothing")

	// Start: 202 at once with the upgrade in preflight; a second start is
	// refused while it is in progress.
	var u api.Upgrade
	code2, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, &u)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code2)
	code, prob, _ = raw(t, m, "POST", "/v1/clusters/lab/upgrade", "application/json", []byte(`{"version":"1.34.4"}`))
	require.Equal(t, 409, code)
	require.Equal(t, api.ProblemTypeBase+api.ProblemUpgradeInProgress, prob.Type)
	require.Equal(t, api.UpgradePreflight, u.State, "preflight is the upgrade's first step")
	eventually(t, "upgrade past its preflight", func() bool {
		u = api.Upgrade{}
		_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/upgrade", nil, &u)
		return err == nil && u.State != api.UpgradePreflight
	})
	require.Equal(t, "lab-1.34.4-1", u.ID)
	require.Equal(t, api.UpgradeRunning, u.State)
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab", nil, &got)
	require.NoError(t, err)
	require.Equal(t, "1.34.4", got.Spec.Version, "spec.version is the target once an upgrade starts")
	require.Equal(t, "1.33.6", got.Status.Version, "status.version moves only at the end")

	// Pool commands: cancel, resume (both forms); a bare-metal pool rolls back only once its upgrade failed or was cancelled.
	for _, p := range []string{"/v1/clusters/lab/pools/workers/upgrade/cancel", "/v1/clusters/lab/pools/workers/upgrade:resume"} {
		code, prob, body := raw(t, m, "POST", p, "application/json", []byte(`{}`))
		require.Equal(t, 200, code, "%s %v %s", p, prob, body)
	}
	code, prob, _ = raw(t, m, "POST", "/v1/clusters/lab/pools/workers/upgrade/rollback", "application/json", []byte(`{}`))
	require.Equal(t, 409, code)
	require.Equal(t, api.ProblemTypeBase+api.ProblemCommandNotAllowed, prob.Type)
	require.Equal(t, "rollback-while-running", prob.Rule)

	// Cluster shape cannot change during an upgrade.
	code, prob, _ = raw(t, m, "PUT", "/v1/clusters/lab", "application/json", mustJSON(t, clusterSpec("lab", "1.33.6")))
	require.Equal(t, 409, code)
	require.Equal(t, api.ProblemTypeBase+api.ProblemUpgradeInProgress, prob.Type)
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
