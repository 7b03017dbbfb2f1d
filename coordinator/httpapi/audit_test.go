package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/phases"
)

// auditMember is a leader that knows one token per role, refuses every
// release, plans any upgrade, and keeps the audit records the API hands
// it and the audit queries it is asked.
type auditMember struct {
	fakeLeadership
	Authenticator
	AuditTrail
	ReleaseService
	UpgradeService

	mu      sync.Mutex
	records []coordinator.AuditRecord
	queries []api.AuditQuery
}

var roleTokens = map[string]string{
	"viewer":   "vvvvvv.0123456789abcdef0123456789abcdef",
	"operator": "oooooo.0123456789abcdef0123456789abcdef",
	"admin":    "aaaaaa.0123456789abcdef0123456789abcdef",
}

func (m *auditMember) AuthenticateToken(tok string) (api.Token, error) {
	for role, t := range roleTokens {
		if t == tok {
			return api.Token{ID: tok[:6], Kind: api.TokenAPI, Role: role, Description: role + "s"}, nil
		}
	}
	return api.Token{}, &coordinator.RuleError{Rule: "token-unknown", Detail: "unknown", Err: coordinator.ErrUnauthorized}
}
func (m *auditMember) IsLeader() bool       { return true }
func (m *auditMember) AppliedIndex() uint64 { return 1 }
func (m *auditMember) PutRelease(context.Context, api.Release) error {
	return &coordinator.RuleError{Rule: "release-limits", Detail: "no", Err: coordinator.ErrInvalid}
}
func (m *auditMember) Plan(string, api.UpgradeRequest) (phases.Plan, error) {
	return phases.Plan{}, nil
}
func (m *auditMember) RecordAudit(_ context.Context, r coordinator.AuditRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records = append(m.records, r)
	return nil
}
func (m *auditMember) AuditLog(q api.AuditQuery) api.AuditPage {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queries = append(m.queries, q)
	return api.AuditPage{Entries: []api.AuditEntry{}}
}

func send(h http.Handler, method, path, role, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if role != "" {
		req.Header.Set("Authorization", "Bearer "+roleTokens[role])
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestRefusedWritesAreRecorded: a write refused for the caller's role or
// its content is recorded with the authenticated principal and the
// refusal; an anonymous or unauthenticated caller, a read and a dry run
// are not.
func TestRefusedWritesAreRecorded(t *testing.T) {
	m := &auditMember{}
	h := New(servicesOf(m), Config{})
	require.Equal(t, 403, send(h, "PUT", "/v1/releases/1.34.4", "operator", `{}`).Code)
	require.Equal(t, 422, send(h, "PUT", "/v1/releases/1.34.4", "admin", `{}`).Code)
	require.Equal(t, 401, send(h, "PUT", "/v1/releases/1.34.4", "", `{}`).Code)
	bad := httptest.NewRequest("PUT", "/v1/releases/1.34.4", strings.NewReader("{}"))
	bad.Header.Set("Authorization", "Bearer zzzzzz.0123456789abcdef0123456789abcdef")
	h.ServeHTTP(httptest.NewRecorder(), bad)
	require.Equal(t, 200, send(h, "GET", "/v1/audit", "admin", "").Code, "reads are not recorded")
	require.Equal(t, 200, send(h, "POST", "/v1/clusters/lab/upgrade", "operator", `{"version":"1.34.4","dryRun":true}`).Code)

	require.Equal(t, []coordinator.AuditRecord{
		{Principal: "token:oooooo (operators)", Kind: KindOperator, Role: "operator", Method: "PUT", Route: "/v1/releases/{version}", Path: "/v1/releases/1.34.4",
			Status: 403, Problem: api.ProblemTypeBase + api.ProblemForbidden, Rule: "role-admin"},
		{Principal: "token:aaaaaa (admins)", Kind: KindOperator, Role: "admin", Method: "PUT", Route: "/v1/releases/{version}", Path: "/v1/releases/1.34.4",
			Status: 422, Problem: api.ProblemTypeBase + api.ProblemValidation, Rule: "release-limits"},
	}, m.records)
}

// TestRefusalsAreRecordedAtABoundedRate: one principal's refusals in a
// loop add a burst of records, then one per interval, which says how many
// were left out; another principal has its own allowance.
func TestRefusalsAreRecordedAtABoundedRate(t *testing.T) {
	m := &auditMember{}
	clock := clock.NewManual(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	h := New(servicesOf(m), Config{Clock: clock, AuditRefusalBurst: 3, AuditRefusalEvery: time.Minute})
	for range 50 {
		require.Equal(t, 403, send(h, "PUT", "/v1/releases/1.34.4", "viewer", `{}`).Code, "every refusal is answered")
	}
	require.Len(t, m.records, 3)
	require.Equal(t, 403, send(h, "PUT", "/v1/releases/1.34.4", "operator", `{}`).Code)
	require.Len(t, m.records, 4, "another principal is recorded")
	clock.Advance(time.Minute)
	send(h, "PUT", "/v1/releases/1.34.4", "viewer", `{}`)
	require.Len(t, m.records, 5)
	last := m.records[4]
	require.Equal(t, "token:vvvvvv (viewers)", last.Principal)
	require.Equal(t, 47, last.Suppressed, "the 47 refusals left out")
}

func TestRefusalLimiterForgetsIdlePrincipals(t *testing.T) {
	l := newRefusalLimiter(time.Second, 1)
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for i := range maxRefusalBuckets {
		ok, _ := l.admit(string(rune('a'+i%26))+strings.Repeat("x", i), t0)
		require.True(t, ok)
	}
	ok, _ := l.admit("late", t0.Add(time.Hour))
	require.True(t, ok)
	require.Len(t, l.by, 1, "every principal idle (its allowance full again) was forgotten")
}

// TestAuditQueryIsChecked: GET /v1/audit passes a well-formed query on and
// refuses a bad one with a problem naming the parameter.
func TestAuditQueryIsChecked(t *testing.T) {
	m := &auditMember{}
	h := New(servicesOf(m), Config{})
	rec := send(h, "GET", "/v1/audit?cluster=lab&principal=token:aaaaaa&since=2026-11-23T12:00:00Z&until=2026-11-24T00:00:00.5Z&before=42&limit=7", "admin", "")
	require.Equal(t, 200, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"entries":[]}`, rec.Body.String())
	require.Equal(t, []api.AuditQuery{{Cluster: "lab", Principal: "token:aaaaaa", Since: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC),
		Until: time.Date(2026, 11, 24, 0, 0, 0, 500000000, time.UTC), Before: 42, Limit: 7}}, m.queries)

	for _, c := range []struct{ query, rule string }{
		{"since=yesterday", "since"},
		{"until=2026-11-23", "until"},
		{"since=2026-11-23T12:00:00Z&until=2026-11-23T12:00:00Z", "until"},
		{"before=0", "before"},
		{"before=-3", "before"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=ten", "limit"},
		{"cluster=a&cluster=b", "cluster"},
		{"clustr=lab", "query"},
		{"principal=" + strings.Repeat("p", 300), "principal"},
	} {
		rec := send(h, "GET", "/v1/audit?"+c.query, "admin", "")
		p := requireProblem(t, rec, 422, api.ProblemValidation)
		require.Equal(t, c.rule, p.Rule, c.query)
	}
	require.Len(t, m.queries, 1, "a refused query reads nothing")
	require.Equal(t, 403, send(h, "GET", "/v1/audit", "operator", "").Code, "admins only")
}
