package coordinator_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator/httpapi"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/trust"
)

// call sends one request over TLS with an optional bearer token and client
// certificate, and returns the status and problem.
func call(t *testing.T, addr, method, path, token string, cert *tls.Certificate, body string) (int, api.Problem) {
	t.Helper()
	req, err := http.NewRequest(method, "https://"+addr+path, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpsClient(cert).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var p api.Problem
	if resp.StatusCode >= 300 {
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"), "%s %s", method, path)
		if method == http.MethodHead { // no body: the status is all there is
			p.Status = resp.StatusCode
			return resp.StatusCode, p
		}
		require.NoError(t, jsonDecode(resp, &p))
	}
	return resp.StatusCode, p
}

// TestEveryRouteRequiresItsRole walks every route the API registers and
// proves that anonymous callers get 401 and callers whose role is too low
// get 403, before any handler runs (state unchanged). A route registered
// outside the route table, or without a requirement, fails here.
func TestEveryRouteRequiresItsRole(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps())
	m := tc.members[0]
	cl := m.client()
	registerLab(t, cl)
	ctx := context.Background()
	tokens := map[string]string{}
	for _, role := range []string{"viewer", "operator"} {
		var tok api.Token
		_, err := cl.Do(ctx, http.MethodPost, "/v1/tokens", api.TokenRequest{Kind: api.TokenAPI, Role: role}, &tok)
		require.NoError(t, err)
		tokens[role] = tok.Secret
	}
	agent, err := enrollAgent(ctx, cl, m.addr, "lab", "cp-1")
	require.NoError(t, err)

	reqs := httpapi.Requirements(m.apiConfig)
	handler := m.srv.Handler
	params := strings.NewReplacer("{name}", "lab", "{cluster}", "lab", "{node}", "cp-1", "{pool}", "workers",
		"{version}", "1.34.4", "{id}", "x", "{cmd}", "cancel", "{verb}", "drain", "*", "kubelet")
	before := snapshot(t, cl)
	walked := 0
	require.NoError(t, chi.Walk(handler.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		walked++
		need, ok := reqs[method+" "+route]
		require.True(t, ok, "route %s %s has no requirement in the route table", method, route)
		path := params.Replace(route)
		if need == httpapi.Public {
			return nil
		}
		code, p := call(t, m.addr, method, path, "", nil, "{}")
		require.Equal(t, http.StatusUnauthorized, code, "anonymous %s %s: %+v", method, route, p)

		var weaker []string // credentials below the requirement
		var weakCert *tls.Certificate
		switch need {
		case httpapi.NeedOperator:
			weaker = []string{tokens["viewer"]}
		case httpapi.NeedAdmin:
			weaker = []string{tokens["viewer"], tokens["operator"]}
		case httpapi.NeedAgent:
			weaker = []string{testAdmin}
		case httpapi.NeedViewer:
			weakCert = agent.cert
		case httpapi.NeedMember:
			weaker = []string{testAdmin}
			weakCert = agent.cert
		}
		for _, tok := range weaker {
			code, p := call(t, m.addr, method, path, tok, nil, "{}")
			require.Equal(t, http.StatusForbidden, code, "%s %s with a weaker token: %+v", method, route, p)
		}
		if weakCert != nil {
			code, p := call(t, m.addr, method, path, "", weakCert, "")
			require.Equal(t, http.StatusForbidden, code, "%s %s as an agent: %+v", method, route, p)
		}
		return nil
	}))
	require.Equal(t, len(reqs), walked, "every route in the table is registered")
	require.Equal(t, before, snapshot(t, cl), "refused requests changed state")
}

// TestAgentsTouchOnlyTheirOwnNode: worker-1's certificate may not read or
// answer worker-2's operations, register or beat as worker-2, or renew
// worker-2's certificate.
func TestAgentsTouchOnlyTheirOwnNode(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps())
	m := tc.members[0]
	registerLab(t, m.client())
	ctx := context.Background()
	w1, err := enrollAgent(ctx, m.client(), m.addr, "lab", "worker-1")
	require.NoError(t, err)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/agents/lab/worker-2/operations", ""},
		{"POST", "/v1/agents/lab/worker-2/results", `{"id":"x","kind":"UpgradeBinary","state":"succeeded"}`},
		{"POST", "/v1/agents/lab/worker-2/heartbeat", `{"cluster":"lab","node":"worker-2"}`},
		{"POST", "/v1/agents/lab/worker-1/heartbeat", `{"cluster":"lab","node":"worker-2"}`},
		{"POST", "/v1/agents/register", `{"cluster":"lab","node":"worker-2"}`},
		{"POST", "/v1/agents/lab/worker-2/certificate", `{"csr":""}`},
	} {
		code, p := call(t, m.addr, c.method, c.path, "", w1.cert, c.body)
		require.Equal(t, http.StatusForbidden, code, "%s %s %s: %+v", c.method, c.path, c.body, p)
	}
	// Its own node it may.
	code, p := call(t, m.addr, "POST", "/v1/agents/register", "", w1.cert, `{"cluster":"lab","node":"worker-1"}`)
	require.Equal(t, http.StatusOK, code, "%+v", p)
}

// TestEnrollmentRefusals: every bad enrollment is refused with a problem
// naming the reason, and stores nothing.
func TestEnrollmentRefusals(t *testing.T) {
	clock := clock.NewManual(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	m := startMemberAt(t, "m1", t.TempDir(), true, newFakeOps(), "", "127.0.0.1:0", clock)
	cl := m.client()
	registerLab(t, cl)
	ctx := context.Background()
	newToken := func(cluster string, uses int) string {
		var tok api.Token
		_, err := cl.Do(ctx, http.MethodPost, "/v1/tokens", api.TokenRequest{Kind: api.TokenBootstrap, Cluster: cluster, Uses: uses, TTL: "1h"}, &tok)
		require.NoError(t, err)
		return tok.Secret
	}
	csrFor := func(node string) string {
		key, _ := trust.NewKey()
		csr, _ := trust.NewCSR(trust.AgentIdentity("lab", node), key)
		return string(csr)
	}
	enroll := func(token, node, csr string) (int, api.Problem) {
		body, _ := jsonString(api.EnrollRequest{Cluster: "lab", Node: node, CSR: csr})
		return call(t, m.addr, "POST", "/v1/agents/enroll", token, nil, body)
	}
	good := newToken("lab", 1)
	other := newToken("elsewhere", 1)
	expiring := newToken("lab", 1)
	var forged strings.Builder
	forged.WriteString(good[:7])
	forged.WriteString(strings.Repeat("a", 16))
	var opTok api.Token
	_, err := cl.Do(ctx, http.MethodPost, "/v1/tokens", api.TokenRequest{Kind: api.TokenAPI, Role: "operator"}, &opTok)
	require.NoError(t, err)

	before := snapshot(t, cl)
	tokensBefore := m.c.Tokens()
	for _, c := range []struct {
		name, token, node, csr string
		status                 int
		rule                   string
	}{
		{"no token", "", "worker-1", csrFor("worker-1"), 401, "authentication-required"},
		{"malformed token", "nope", "worker-1", csrFor("worker-1"), 401, "token-malformed"},
		{"forged secret", forged.String(), "worker-1", csrFor("worker-1"), 401, "token-secret"},
		{"unknown token", "zzzzzz.0123456789abcdef", "worker-1", csrFor("worker-1"), 401, "token-unknown"},
		{"an API token", opTok.Secret, "worker-1", csrFor("worker-1"), 401, "token-kind"},
		{"token of another cluster", other, "worker-1", csrFor("worker-1"), 403, "token-cluster"},
		{"node not in the cluster", good, "ghost", csrFor("ghost"), 403, "node-unknown"},
		{"csr for another node", good, "worker-1", csrFor("worker-2"), 403, "csr-invalid"},
		{"garbage csr", good, "worker-1", "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n", 403, "csr-invalid"},
	} {
		code, p := enroll(c.token, c.node, c.csr)
		require.Equal(t, c.status, code, "%s: %+v", c.name, p)
		require.Equal(t, c.rule, p.Rule, "%s: %+v", c.name, p)
	}
	require.Equal(t, before, snapshot(t, cl))
	require.Equal(t, tokensBefore, m.c.Tokens(), "refused enrollments spent no use")
	// The audit log holds the refusals of a token that authenticated (for
	// another cluster, a node the cluster lacks, a bad CSR), named by the
	// token's ID, and none of callers that did not authenticate.
	var refusedRules []string
	for _, e := range m.c.AuditLog(api.AuditQuery{Limit: 100}).Entries {
		if e.Route == "/v1/agents/enroll" {
			require.Equal(t, api.AuditRefused, e.Outcome)
			require.True(t, strings.HasPrefix(e.Principal, "bootstrap-token:"), e.Principal)
			require.Equal(t, "bootstrap", e.PrincipalKind)
			refusedRules = append(refusedRules, e.Rule)
		}
	}
	require.Equal(t, []string{"csr-invalid", "csr-invalid", "node-unknown", "token-cluster"}, refusedRules, "newest first")

	// A token enrolls as often as it allows, then is used up ("reused").
	code, p := enroll(good, "worker-1", csrFor("worker-1"))
	require.Equal(t, 200, code, "%+v", p)
	code, p = enroll(good, "worker-2", csrFor("worker-2"))
	require.Equal(t, 401, code)
	require.Equal(t, "token-used-up", p.Rule)
	// Past its expiry (injected clock) a token enrolls nobody.
	clock.Set(clock.Now().Add(61 * time.Minute))
	code, p = enroll(expiring, "worker-2", csrFor("worker-2"))
	require.Equal(t, 401, code)
	require.Equal(t, "token-expired", p.Rule)
}

// TestRevokedAndForeignCertificates: a certificate from another CA fails
// the handshake's verification and counts as no credential; deleting a
// node from the cluster revokes its agent's certificate.
func TestRevokedAndForeignCertificates(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps())
	m := tc.members[0]
	cl := m.client()
	spec := registerLab(t, cl)
	ctx := context.Background()
	w2, err := enrollAgent(ctx, cl, m.addr, "lab", "worker-2")
	require.NoError(t, err)
	code, _ := call(t, m.addr, "POST", "/v1/agents/register", "", w2.cert, `{"cluster":"lab","node":"worker-2"}`)
	require.Equal(t, 200, code)

	// Another CA's certificate for the same name.
	other, err := trust.NewCA("other", time.Now())
	require.NoError(t, err)
	key, _ := trust.NewKey()
	csr, _ := trust.NewCSR(trust.AgentIdentity("lab", "worker-2"), key)
	certPEM, _, err := other.SignAgent(csr, trust.AgentIdentity("lab", "worker-2"), time.Now(), time.Hour)
	require.NoError(t, err)
	keyPEM, _ := trust.EncodeKey(key)
	kp, err := trust.KeyPair(certPEM, keyPEM, nil)
	require.NoError(t, err)
	req, _ := http.NewRequest("GET", "https://"+m.addr+"/v1/agents/lab/worker-2/operations", nil)
	if resp, err := httpsClient(&kp).Do(req); err == nil {
		resp.Body.Close()
		require.Fail(t, "a certificate from another CA was accepted", "status %d", resp.StatusCode)
	}

	// Remove worker-2 from the spec: its certificate stops working.
	for i := range spec.Pools {
		if spec.Pools[i].Name == "workers" {
			spec.Pools[i].Nodes = spec.Pools[i].Nodes[:1]
		}
	}
	put(t, cl, "/v1/clusters/lab", spec)
	code, p := call(t, m.addr, "POST", "/v1/agents/lab/worker-2/heartbeat", "", w2.cert, `{"cluster":"lab","node":"worker-2"}`)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Equal(t, "certificate-revoked", p.Rule)
}

// TestRenewalReplacesTheCertificate: an agent renews with its current
// certificate; the two newest stay valid, an older one is refused.
func TestRenewalReplacesTheCertificate(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps())
	m := tc.members[0]
	registerLab(t, m.client())
	ctx := context.Background()
	cred, err := enrollAgent(ctx, m.client(), m.addr, "lab", "cp-1")
	require.NoError(t, err)
	renew := func(with *tls.Certificate) *tls.Certificate {
		key, _ := trust.NewKey()
		csr, _ := trust.NewCSR(trust.AgentIdentity("lab", "cp-1"), key)
		var resp api.EnrollResponse
		_, err := client.New("https://"+m.addr, httpsClient(with)).Do(ctx, http.MethodPost, "/v1/agents/lab/cp-1/certificate", api.RenewRequest{CSR: string(csr)}, &resp)
		require.NoError(t, err)
		keyPEM, _ := trust.EncodeKey(key)
		kp, err := trust.KeyPair([]byte(resp.Certificate), keyPEM, testCA.Cert)
		require.NoError(t, err)
		return &kp
	}
	first := cred.cert
	second := renew(first)
	third := renew(second)
	for _, c := range []*tls.Certificate{second, third} {
		code, p := call(t, m.addr, "POST", "/v1/agents/register", "", c, `{"cluster":"lab","node":"cp-1"}`)
		require.Equal(t, 200, code, "%+v", p)
	}
	code, p := call(t, m.addr, "POST", "/v1/agents/register", "", first, `{"cluster":"lab","node":"cp-1"}`)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Equal(t, "certificate-revoked", p.Rule)
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
