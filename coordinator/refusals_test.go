package coordinator_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// TestAdminRequestsRefusedByTheirRule sends admin requests that no rule
// let through before: each is refused with a 4xx problem naming its rule,
// adds nothing to the Raft log but its audit record (none for a dry run),
// leaves the state as it was, and what it aimed at reads the same
// afterwards.
func TestAdminRequestsRefusedByTheirRule(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps())
	m := tc.members[0]
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.33.7", release("1.33.7"))
	put(t, cl, "/v1/clusters/lab", clusterSpec("lab", "1.33.6"))
	put(t, cl, "/v1/channels/regular", api.ChannelUpdate{DefaultVersion: "1.33.6", AutoUpgradeTarget: "1.33.7"})
	// In process, as the fuzzer calls it: every refusal gets its audit
	// record, however many come in a second.
	handler, _ := fuzzHandler(m)

	js := func(v any) string { return string(mustJSON(t, v)) }
	token := func(cluster string) string {
		return js(api.TokenRequest{Kind: api.TokenBootstrap, Cluster: cluster})
	}
	day := time.Now().UTC().Truncate(24 * time.Hour)
	policy := func(rrule string) string {
		return js(api.MaintenancePolicy{Window: &api.MaintenanceWindow{Start: day, End: day.Add(8 * time.Hour), Recurrence: rrule}})
	}
	cloud := clusterSpec("lab2", "1.33.6")
	cloud.Cloud = &api.CloudSpec{Provider: "aws"}
	containerd := func(version string) string {
		r := release("1.37.0")
		r.Components.Containerd.Version = version
		return js(r)
	}
	emergency := func(reason string, dry bool) string {
		return js(api.UpgradeRequest{Version: "1.33.7", DryRun: dry, Emergency: &api.Emergency{Reason: reason}})
	}
	const jsonType = "application/json"
	requireGET := func(path string, want int) func(t *testing.T) {
		return func(t *testing.T) {
			code, _, body := raw(t, m, http.MethodGet, path, "", nil)
			require.Equal(t, want, code, string(body))
		}
	}
	noTokenFor := func(cluster string) func(t *testing.T) {
		return func(t *testing.T) {
			for _, tok := range m.c.Tokens() {
				require.NotEqual(t, cluster, tok.Cluster)
			}
		}
	}
	regularUnchanged := func(t *testing.T) {
		var ch api.Channel
		_, err := cl.Do(context.Background(), http.MethodGet, "/v1/channels/regular", nil, &ch)
		require.NoError(t, err)
		require.Equal(t, []string{"1.33.6", "1.33.7"}, []string{ch.DefaultVersion, ch.AutoUpgradeTarget})
	}

	for _, r := range []struct {
		name, method, path, ctype, body string
		status                          int
		suffix, rule                    string
		after                           func(t *testing.T) // reads what the request aimed at
	}{
		// Bootstrap tokens: for a name a cluster can be registered under.
		{"token for a/b", "POST", "/v1/tokens", jsonType, token("a/b"), 422, api.ProblemValidation, "cluster-name", noTokenFor("a/b")},
		{"token for ..", "POST", "/v1/tokens", jsonType, token(".."), 422, api.ProblemValidation, "cluster-name", noTokenFor("..")},
		{"token for a NUL", "POST", "/v1/tokens", jsonType, token("a\x00b"), 422, api.ProblemValidation, "cluster-name", noTokenFor("a\x00b")},
		{"token for a newline", "POST", "/v1/tokens", jsonType, token("lab\n"), 422, api.ProblemValidation, "cluster-name", noTokenFor("lab\n")},
		{"token for 300 bytes", "POST", "/v1/tokens", jsonType, token(strings.Repeat("a", 300)), 422, api.ProblemValidation, "cluster-name", noTokenFor(strings.Repeat("a", 300))},
		{"token for upper case", "POST", "/v1/tokens", jsonType, token("Lab"), 422, api.ProblemValidation, "cluster-name", noTokenFor("Lab")},

		// RRULE COUNT: a whole number of at least 1, or absent.
		{"COUNT=-1", "PUT", "/v1/clusters/lab/maintenance-policy", jsonType, policy("FREQ=DAILY;COUNT=-1"), 422, api.ProblemPolicyInvalid, maintenance.RuleWindowRecurrenceInvalid, nil},
		{"COUNT=0", "PUT", "/v1/clusters/lab/maintenance-policy", jsonType, policy("FREQ=DAILY;COUNT=0"), 422, api.ProblemPolicyInvalid, maintenance.RuleWindowRecurrenceInvalid, nil},
		{"COUNT=-5", "PUT", "/v1/clusters/lab/maintenance-policy", jsonType, policy("RRULE:FREQ=DAILY;COUNT=-5"), 422, api.ProblemPolicyInvalid, maintenance.RuleWindowRecurrenceInvalid, nil},
		{"INTERVAL=0", "PUT", "/v1/clusters/lab/maintenance-policy", jsonType, policy("FREQ=DAILY;INTERVAL=0"), 422, api.ProblemPolicyInvalid, maintenance.RuleWindowRecurrenceInvalid, nil},

		// Cloud adapters: only those molt has.
		{"cloud aws", "PUT", "/v1/clusters/lab2", jsonType, js(cloud), 422, api.ProblemValidation, "cloud-provider", requireGET("/v1/clusters/lab2", 404)},

		// A route without parameters takes no body, or {}.
		{"rewrap with a field", "POST", "/v1/secrets/rewrap", jsonType, `{"key":"k-new"}`, 400, api.ProblemValidation, "request-body", nil},
		{"rewrap with null", "POST", "/v1/secrets/rewrap", jsonType, `null`, 400, api.ProblemValidation, "request-body", nil},
		{"a pool command with a field", "POST", "/v1/clusters/lab/pools/workers/upgrade/cancel", jsonType, `{"force":true}`, 400, api.ProblemValidation, "request-body", nil},
		{"a retry with a field", "POST", "/v1/clusters/lab/nodes/cp-1/retry", jsonType, `{"attempts":3}`, 400, api.ProblemValidation, "request-body", nil},

		// Media types: application/json, with no parameter but charset=utf-8.
		{"utf-16 token", "POST", "/v1/tokens", "application/json; charset=utf-16", token("lab"), 415, api.ProblemUnsupportedMedia, "content-type", noTokenFor("lab")},
		{"no media type token", "POST", "/v1/tokens", "", token("lab"), 415, api.ProblemUnsupportedMedia, "content-type", noTokenFor("lab")},
		{"utf-16 release", "PUT", "/v1/releases/1.37.0", "application/json; charset=utf-16", js(release("1.37.0")), 415, api.ProblemUnsupportedMedia, "content-type", requireGET("/v1/releases/1.37.0", 404)},
		{"no media type release", "PUT", "/v1/releases/1.37.0", "", js(release("1.37.0")), 415, api.ProblemUnsupportedMedia, "content-type", requireGET("/v1/releases/1.37.0", 404)},
		{"another parameter", "PUT", "/v1/releases/1.37.0", "application/json; charset=utf-8; v=2", js(release("1.37.0")), 415, api.ProblemUnsupportedMedia, "content-type", requireGET("/v1/releases/1.37.0", 404)},
		{"no media type channel", "PUT", "/v1/channels/regular", "", `{"defaultVersion":"","autoUpgradeTarget":""}`, 415, api.ProblemUnsupportedMedia, "content-type", regularUnchanged},
		{"utf-16 rewrap", "POST", "/v1/secrets/rewrap", "application/json; charset=utf-16", `{}`, 415, api.ProblemUnsupportedMedia, "content-type", nil},

		// A channel is unset field by field, with "".
		{"null channel", "PUT", "/v1/channels/regular", jsonType, `null`, 400, api.ProblemValidation, "request-body", regularUnchanged},
		{"empty channel", "PUT", "/v1/channels/regular", jsonType, `{}`, 422, api.ProblemValidation, "channel-update", regularUnchanged},
		{"half a channel", "PUT", "/v1/channels/regular", jsonType, `{"defaultVersion":"1.33.7"}`, 422, api.ProblemValidation, "channel-update", regularUnchanged},
		{"null policy", "PUT", "/v1/clusters/lab/maintenance-policy", jsonType, `null`, 400, api.ProblemValidation, "request-body", nil},

		// Members.
		{"remove an unknown member", "DELETE", "/v1/members/nope", "", ``, 404, api.ProblemNotFound, "member-unknown", func(t *testing.T) {
			ms, err := m.c.Members()
			require.NoError(t, err)
			require.Len(t, ms, 1)
		}},

		// Releases: at least one component; component versions are versions.
		{"release without components", "PUT", "/v1/releases/1.37.0", jsonType, `{"version":"1.37.0"}`, 422, api.ProblemValidation, "release-components", requireGET("/v1/releases/1.37.0", 404)},
		{"release with a bare version", "PUT", "/v1/releases/1.37.0", jsonType, `{"version":"1.37.0","components":{"containerd":{"version":"2.1.4"}}}`, 422, api.ProblemValidation, "release-artifact", requireGET("/v1/releases/1.37.0", 404)},
		{"containerd version a command", "PUT", "/v1/releases/1.37.0", jsonType, containerd(`"; rm -rf /"`), 422, api.ProblemVersionInvalid, phases.RuleInvalid, requireGET("/v1/releases/1.37.0", 404)},
		{"containerd version a path", "PUT", "/v1/releases/1.37.0", jsonType, containerd("../../etc/x"), 422, api.ProblemVersionInvalid, phases.RuleInvalid, requireGET("/v1/releases/1.37.0", 404)},
		{"containerd version a Debian suffix with a slash", "PUT", "/v1/releases/1.37.0", jsonType, containerd("1.6.20~ds1/x"), 422, api.ProblemVersionInvalid, phases.RuleInvalid, requireGET("/v1/releases/1.37.0", 404)},
		{"containerd version with a space", "PUT", "/v1/releases/1.37.0", jsonType, containerd("2.1.4 "), 422, api.ProblemVersionInvalid, phases.RuleInvalid, requireGET("/v1/releases/1.37.0", 404)},

		// Emergency overrides: a reason that says something. (GET of
		// lab's upgrade is 409 no-upgrade: none was ever started.)
		{"blank emergency reason", "POST", "/v1/clusters/lab/upgrade", jsonType, emergency("   ", false), 422, api.ProblemValidation, maintenance.RuleOverrideReasonRequired, requireGET("/v1/clusters/lab/upgrade", 409)},
		{"tab and newline reason", "POST", "/v1/clusters/lab/upgrade", jsonType, emergency("\t\n", false), 422, api.ProblemValidation, maintenance.RuleOverrideReasonRequired, requireGET("/v1/clusters/lab/upgrade", 409)},
		{"blank reason in a dry run", "POST", "/v1/clusters/lab/upgrade", jsonType, emergency(" ", true), 422, api.ProblemValidation, maintenance.RuleOverrideReasonRequired, nil},
	} {
		t.Run(r.name, func(t *testing.T) {
			before := m.mark()
			state, err := m.c.StateWithoutAudit()
			require.NoError(t, err)
			req := httptest.NewRequest(r.method, "https://molt.test"+r.path, bytes.NewReader([]byte(r.body)))
			if r.ctype != "" {
				req.Header.Set("Content-Type", r.ctype)
			}
			req.Header.Set("Authorization", "Bearer "+testAdmin)
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)

			require.Equal(t, r.status, rec.Code, rec.Body.String())
			require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
			var p api.Problem
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
			require.Equal(t, api.ProblemTypeBase+r.suffix, p.Type, rec.Body.String())
			require.Equal(t, r.rule, p.Rule, rec.Body.String())
			require.NotEmpty(t, p.Detail)

			after, err := m.c.StateWithoutAudit()
			require.NoError(t, err)
			require.Equal(t, state, after, "a refused request changed the state")
			if strings.Contains(r.body, `"dryRun":true`) {
				require.Equal(t, before, m.mark(), "a dry run is not a write: refused, it is not even recorded")
			} else {
				requireOnlyAuditRecord(t, m, before, r.method, r.path, r.status, r.rule)
			}
			if r.after != nil {
				r.after(t)
			}
		})
	}

	// What the rules leave alone still passes: a token for a cluster not
	// registered yet, a body declared as UTF-8, a route without
	// parameters called without a body or with {}, a channel unset with
	// "", a pre-release containerd and a distribution's, a release of
	// static pods only.
	for _, ok := range []struct {
		method, path, ctype, body string
		status                    int
	}{
		{"POST", "/v1/tokens", "application/json; charset=UTF-8", token("lab2"), 201},
		{"POST", "/v1/secrets/rewrap", "", ``, 200},
		{"POST", "/v1/secrets/rewrap", jsonType, `{}`, 200},
		{"PUT", "/v1/channels/regular", jsonType, `{"defaultVersion":"1.33.6","autoUpgradeTarget":""}`, 200},
		{"PUT", "/v1/releases/1.37.0", jsonType, containerd("2.1.0-rc.1"), 200},
		{"PUT", "/v1/releases/1.37.2", jsonType, js(func() api.Release { r := release("1.37.2"); r.Components.Containerd.Version = "1.6.20~ds1"; return r }()), 200},
		{"PUT", "/v1/releases/1.37.1", jsonType, `{"version":"1.37.1","components":{"staticPods":{"kube-apiserver":"registry.k8s.io/kube-apiserver:v1.37.1"}}}`, 200},
	} {
		code, prob, body := raw(t, m, ok.method, ok.path, ok.ctype, []byte(ok.body))
		require.Equal(t, ok.status, code, "%s %s: %v %s", ok.method, ok.path, prob, body)
	}
	var ch api.Channel
	_, err := cl.Do(context.Background(), http.MethodGet, "/v1/channels/regular", nil, &ch)
	require.NoError(t, err)
	require.Equal(t, "", ch.AutoUpgradeTarget, `"" unsets the target`)
	require.Equal(t, "1.33.6", ch.DefaultVersion)
}
