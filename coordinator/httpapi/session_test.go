package httpapi

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
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
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/web"
)

// webMember is a member with a viewer and an operator token whose
// expiry and validity the test sets, and a node retry it counts.
type webMember struct {
	fakeLeadership
	Authenticator
	AuditTrail
	UpgradeService     // RetryNode
	MaintenanceService // Policy

	mu      sync.Mutex
	revoked map[string]bool
	expires time.Time
	retries int
	policy  maintenance.Policy
}

const (
	viewerToken   = "viewer.0123456789abcdef0123456789abcdef"
	operatorToken = "oper.0123456789abcdef0123456789abcdef"
)

func (m *webMember) AuthenticateToken(tok string) (api.Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.revoked[tok] {
		return api.Token{}, &coordinator.RuleError{Rule: "token-unknown", Detail: "no such token", Err: coordinator.ErrUnauthorized}
	}
	switch tok {
	case viewerToken:
		return api.Token{ID: "viewer", Kind: api.TokenAPI, Role: "viewer", Expires: m.expires}, nil
	case operatorToken:
		return api.Token{ID: "oper", Kind: api.TokenAPI, Role: "operator", Description: "on call", Expires: m.expires}, nil
	case testToken:
		return api.Token{ID: "abcdef", Kind: api.TokenAPI, Role: "admin"}, nil
	}
	return api.Token{}, &coordinator.RuleError{Rule: "token-unknown", Detail: "no such token", Err: coordinator.ErrUnauthorized}
}

// RecordAudit takes the records the API stores on their own (refusals):
// this fake keeps none.
func (m *webMember) RecordAudit(context.Context, coordinator.AuditRecord) error { return nil }

func (m *webMember) IsLeader() bool       { return true }
func (m *webMember) AppliedIndex() uint64 { return 7 }
func (m *webMember) RetryNode(context.Context, string, string) error {
	m.mu.Lock()
	m.retries++
	m.mu.Unlock()
	return nil
}
func (m *webMember) Policy(cluster string) (maintenance.Policy, error) {
	if cluster != "lab" {
		return maintenance.Policy{}, coordinator.ErrNotFound
	}
	return m.policy, nil
}

func (m *webMember) revoke(tok string) {
	m.mu.Lock()
	if m.revoked == nil {
		m.revoked = map[string]bool{}
	}
	m.revoked[tok] = true
	m.mu.Unlock()
}

type webReq struct {
	method, path, body string
	bearer             string
	cookie             string
	csrf               string
	origin             string
}

func serve(h http.Handler, q webReq) *httptest.ResponseRecorder {
	var body io.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	r := httptest.NewRequest(q.method, "https://member.test"+q.path, body)
	if q.body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if q.bearer != "" {
		r.Header.Set("Authorization", "Bearer "+q.bearer)
	}
	if q.cookie != "" {
		r.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: q.cookie})
	}
	if q.csrf != "" {
		r.Header.Set(api.CSRFHeader, q.csrf)
	}
	if q.origin != "" {
		r.Header.Set("Origin", q.origin)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// signIn posts tok to /v1/session and returns the cookie and the answer.
func signIn(t *testing.T, h http.Handler, tok string) (*http.Cookie, api.Session) {
	t.Helper()
	rec := serve(h, webReq{method: "POST", path: "/v1/session", bearer: tok})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var s api.Session
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &s))
	cs := rec.Result().Cookies()
	require.Len(t, cs, 1)
	return cs[0], s
}

func TestSessionCookieStandsForTheToken(t *testing.T) {
	clock := clock.NewManual(time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC))
	m := &webMember{}
	h := New(servicesOf(m), Config{Clock: clock})

	c, s := signIn(t, h, operatorToken)
	require.Equal(t, api.SessionCookie, c.Name)
	require.True(t, c.HttpOnly, "scripts cannot read the cookie")
	require.True(t, c.Secure)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/", c.Path)
	require.Zero(t, c.MaxAge, "a browser-session cookie")
	require.NotContains(t, c.Value, operatorToken, "the cookie does not carry the token")
	require.Equal(t, "token:oper (on call)", s.Name)
	require.Equal(t, "operator", s.Role)
	require.NotEmpty(t, s.CSRF)
	require.Equal(t, clock.Now().Add(DefaultSessionTTL), s.Expires)

	// Reads with the cookie alone; the answer names the caller and the CSRF value.
	rec := serve(h, webReq{method: "GET", path: "/v1/session", cookie: c.Value})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var got api.Session
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	require.Equal(t, s, got)

	// A write needs the CSRF header, and this member's origin when Origin is sent.
	retry := webReq{method: "POST", path: "/v1/clusters/lab/nodes/w-1/retry", body: "{}", cookie: c.Value}
	p := requireProblem(t, serve(h, retry), http.StatusForbidden, api.ProblemForbidden)
	require.Equal(t, "csrf", p.Rule)
	bad := retry
	bad.csrf = s.CSRF + "x"
	require.Equal(t, "csrf", requireProblem(t, serve(h, bad), http.StatusForbidden, api.ProblemForbidden).Rule)
	foreign := retry
	foreign.csrf, foreign.origin = s.CSRF, "https://evil.test"
	require.Equal(t, "csrf-origin", requireProblem(t, serve(h, foreign), http.StatusForbidden, api.ProblemForbidden).Rule)
	require.Zero(t, m.retries, "refused writes reached no handler")
	ok := retry
	ok.csrf, ok.origin = s.CSRF, "https://member.test"
	require.Equal(t, http.StatusNoContent, serve(h, ok).Code)
	ok.origin = ""
	require.Equal(t, http.StatusNoContent, serve(h, ok).Code)
	require.Equal(t, 2, m.retries)

	// A bearer token still works beside it, without CSRF.
	require.Equal(t, http.StatusNoContent, serve(h, webReq{method: "POST", path: retry.path, body: "{}", bearer: operatorToken}).Code)
}

func TestSessionRolesApply(t *testing.T) {
	m := &webMember{}
	h := New(servicesOf(m), Config{})
	c, s := signIn(t, h, viewerToken)
	require.Equal(t, "viewer", s.Role)
	p := requireProblem(t, serve(h, webReq{method: "POST", path: "/v1/clusters/lab/nodes/w-1/retry", body: "{}", cookie: c.Value, csrf: s.CSRF}), http.StatusForbidden, api.ProblemForbidden)
	require.Equal(t, "role-operator", p.Rule)
	require.Contains(t, p.Detail, "role viewer, needs operator")
	require.Zero(t, m.retries)
}

func TestSessionEnds(t *testing.T) {
	start := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	clock := clock.NewManual(start)
	m := &webMember{}
	h := New(servicesOf(m), Config{Clock: clock, SessionTTL: time.Hour})
	get := func(cookie string) *httptest.ResponseRecorder {
		return serve(h, webReq{method: "GET", path: "/v1/session", cookie: cookie})
	}

	t.Run("after its TTL", func(t *testing.T) {
		c, _ := signIn(t, h, viewerToken)
		clock.Advance(time.Hour - time.Second)
		require.Equal(t, http.StatusOK, get(c.Value).Code)
		clock.Advance(time.Second)
		p := requireProblem(t, get(c.Value), http.StatusUnauthorized, api.ProblemUnauthorized)
		require.Equal(t, "session-unknown", p.Rule)
	})
	t.Run("at its token's expiry", func(t *testing.T) {
		clock.Set(start)
		m.expires = start.Add(10 * time.Minute)
		defer func() { m.expires = time.Time{} }()
		c, s := signIn(t, h, viewerToken)
		require.Equal(t, m.expires, s.Expires, "never past the token")
		clock.Advance(10 * time.Minute)
		require.Equal(t, http.StatusUnauthorized, get(c.Value).Code)
	})
	t.Run("when its token is deleted", func(t *testing.T) {
		clock.Set(start)
		c, _ := signIn(t, h, operatorToken)
		m.revoke(operatorToken)
		p := requireProblem(t, get(c.Value), http.StatusUnauthorized, api.ProblemUnauthorized)
		require.Equal(t, "token-unknown", p.Rule)
		m.mu.Lock()
		m.revoked = nil
		m.mu.Unlock()
		require.Equal(t, http.StatusUnauthorized, get(c.Value).Code, "the session was dropped with its token")
	})
	t.Run("on sign-out", func(t *testing.T) {
		clock.Set(start)
		c, s := signIn(t, h, viewerToken)
		out := webReq{method: "DELETE", path: "/v1/session", cookie: c.Value}
		require.Equal(t, "csrf", requireProblem(t, serve(h, out), http.StatusForbidden, api.ProblemForbidden).Rule, "sign-out is a write")
		out.csrf = s.CSRF
		rec := serve(h, out)
		require.Equal(t, http.StatusNoContent, rec.Code)
		cleared := rec.Result().Cookies()
		require.Len(t, cleared, 1)
		require.Equal(t, -1, cleared[0].MaxAge, "the cookie is removed")
		require.Equal(t, http.StatusUnauthorized, get(c.Value).Code)
	})
	t.Run("a made-up cookie", func(t *testing.T) {
		require.Equal(t, "session-unknown", requireProblem(t, get("made-up"), http.StatusUnauthorized, api.ProblemUnauthorized).Rule)
	})
}

func TestSessionNeedsABearerToken(t *testing.T) {
	h := New(servicesOf(&webMember{}), Config{})
	c, s := signIn(t, h, operatorToken)
	p := requireProblem(t, serve(h, webReq{method: "POST", path: "/v1/session", cookie: c.Value, csrf: s.CSRF}), http.StatusUnauthorized, api.ProblemUnauthorized)
	require.Equal(t, "session-needs-token", p.Rule, "a session does not make another")
	require.Equal(t, "authentication-required", requireProblem(t, serve(h, webReq{method: "POST", path: "/v1/session"}), http.StatusUnauthorized, api.ProblemUnauthorized).Rule)
	require.Equal(t, "token-unknown", requireProblem(t, serve(h, webReq{method: "POST", path: "/v1/session", bearer: "nope.nope"}), http.StatusUnauthorized, api.ProblemUnauthorized).Rule)
}

func TestSessionLimit(t *testing.T) {
	clock := clock.NewManual(time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC))
	h := New(servicesOf(&webMember{}), Config{Clock: clock, SessionTTL: time.Hour, MaxSessions: 2})
	signIn(t, h, viewerToken)
	signIn(t, h, viewerToken)
	p := requireProblem(t, serve(h, webReq{method: "POST", path: "/v1/session", bearer: viewerToken}), http.StatusTooManyRequests, api.ProblemTooManyRequests)
	require.Equal(t, "session-limit", p.Rule)
	clock.Advance(time.Hour)
	signIn(t, h, viewerToken) // the expired ones made room
}

func TestWebDisabled(t *testing.T) {
	h := New(servicesOf(&webMember{}), Config{DisableWeb: true})
	requireProblem(t, serve(h, webReq{method: "GET", path: "/ui/"}), http.StatusNotFound, api.ProblemNotFound)
	requireProblem(t, serve(h, webReq{method: "POST", path: "/v1/session", bearer: viewerToken}), http.StatusMethodNotAllowed, api.ProblemMethodNotAllowed)
	p := requireProblem(t, serve(h, webReq{method: "GET", path: "/v1/session", cookie: "anything"}), http.StatusUnauthorized, api.ProblemUnauthorized)
	require.Equal(t, "authentication-required", p.Rule, "session cookies are not looked at")
	require.Equal(t, http.StatusOK, serve(h, webReq{method: "GET", path: "/v1/session", bearer: viewerToken}).Code, "GET /v1/session answers bearer callers")
}

// TestForwardedRequestsLeaveTheSessionCookieBehind: a follower forwards
// the token a session stands for, for the leader to judge, and neither
// the cookie nor the token in the principal it vouches for.
func TestForwardedRequestsLeaveTheSessionCookieBehind(t *testing.T) {
	r := httptest.NewRequest("POST", "/v1/clusters/lab/upgrade", nil)
	r.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: "secret"})
	r = r.WithContext(withPrincipal(r.Context(), Principal{Kind: KindOperator, Name: "token:oper", Role: RoleOperator, session: "secret", token: operatorToken}))
	forwardPrincipal(r)
	require.Empty(t, r.Header.Get("Cookie"))
	require.NotContains(t, r.Header.Get(principalHeader), "secret")
	require.NotContains(t, r.Header.Get(principalHeader), operatorToken)
	require.Equal(t, "Bearer "+operatorToken, r.Header.Get("Authorization"), "the leader judges the session's token itself")
}

func TestWebFiles(t *testing.T) {
	h := New(servicesOf(&webMember{}), Config{})
	for _, p := range []string{"/", "/ui"} {
		rec := serve(h, webReq{method: "GET", path: p})
		require.Equal(t, http.StatusOK, rec.Code, p)
		require.Contains(t, rec.Body.String(), `src="/ui/app.js"`, p)
	}
	rec := serve(h, webReq{method: "GET", path: "/ui/"})
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Equal(t, web.ContentSecurityPolicy, rec.Header().Get("Content-Security-Policy"))
	require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
	require.Equal(t, "DENY", rec.Header().Get("X-Frame-Options"))
	require.Contains(t, rec.Body.String(), `<script type="module" src="/ui/app.js"></script>`)
	etag := rec.Header().Get("ETag")
	require.NotEmpty(t, etag)

	r := httptest.NewRequest("GET", "/ui/app.js", nil)
	r.Header.Set("Accept-Encoding", "br, gzip")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"))
	zr, err := gzip.NewReader(rec.Body)
	require.NoError(t, err)
	js, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Contains(t, string(js), "window.moltUI")

	r = httptest.NewRequest("GET", "/ui/", nil)
	r.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	require.Equal(t, http.StatusNotModified, rec.Code)

	requireProblem(t, serve(h, webReq{method: "GET", path: "/ui/nope.js"}), http.StatusNotFound, api.ProblemNotFound)
	requireProblem(t, serve(h, webReq{method: "GET", path: "/ui/../go.mod"}), http.StatusNotFound, api.ProblemNotFound)
}

func TestMaintenanceCalendar(t *testing.T) {
	day := 24 * time.Hour
	today := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) // a Monday
	m := &webMember{policy: maintenance.Policy{
		Window: &maintenance.Window{Start: today.Add(-7*day + 2*time.Hour), End: today.Add(-7*day + 6*time.Hour), Recurrence: "FREQ=WEEKLY;BYDAY=SA,SU"},
		Exclusions: []maintenance.Exclusion{
			{Name: "past", Start: today.Add(-30 * day), End: today.Add(-20 * day)},
			{Name: "freeze", Start: today.Add(10 * day), End: today.Add(12 * day), Scope: maintenance.ScopeNoMinorUpgrades},
			{Name: "later", Start: today.Add(70 * day), End: today.Add(71 * day)},
		},
	}}
	h := asAdmin(New(servicesOf(m), Config{Clock: clock.NewManual(today.Add(15 * time.Hour))}))
	rec := serve(h, webReq{method: "GET", path: "/v1/clusters/lab/maintenance-policy/calendar"})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var cal api.MaintenanceCalendar
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &cal))
	require.Equal(t, today, cal.From, "today, 00:00 UTC, by default")
	require.Equal(t, today.Add(60*day), cal.To, "60 days by default")
	require.Len(t, cal.Window, 16, "the 8 weekends of 60 days from a Monday")
	require.Equal(t, api.TimeRange{Start: today.Add(5*day + 2*time.Hour), End: today.Add(5*day + 6*time.Hour)}, cal.Window[0])
	require.Equal(t, []api.CalendarExclusion{{Name: "freeze", Start: today.Add(10 * day), End: today.Add(12 * day), Scope: "no_minor_upgrades"}}, cal.Exclusions)

	rec = serve(h, webReq{method: "GET", path: "/v1/clusters/lab/maintenance-policy/calendar?from=2026-11-07T04:00:00Z&days=1"})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	cal = api.MaintenanceCalendar{}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &cal))
	require.Equal(t, []api.TimeRange{
		{Start: today.Add(5*day + 4*time.Hour), End: today.Add(5*day + 6*time.Hour)},
		{Start: today.Add(6*day + 2*time.Hour), End: today.Add(6*day + 4*time.Hour)},
	}, cal.Window, "clipped to the range, Saturday 04:00 to Sunday 04:00")
	require.Empty(t, cal.Exclusions)

	for q, rule := range map[string]string{"?days=0": "days", "?days=93": "days", "?days=x": "days", "?from=yesterday": "from"} {
		p := requireProblem(t, serve(h, webReq{method: "GET", path: "/v1/clusters/lab/maintenance-policy/calendar" + q}), http.StatusUnprocessableEntity, api.ProblemValidation)
		require.Equal(t, rule, p.Rule, q)
	}
	requireProblem(t, serve(h, webReq{method: "GET", path: "/v1/clusters/nope/maintenance-policy/calendar"}), http.StatusNotFound, api.ProblemNotFound)
}

// TestReadsAreCompressed: an operator's read answers gzip to a client that
// accepts it, and plain JSON to one that does not.
func TestReadsAreCompressed(t *testing.T) {
	h := New(servicesOf(&webMember{policy: maintenance.Policy{}}), Config{})
	for _, gz := range []bool{true, false} {
		r := httptest.NewRequest("GET", "/v1/clusters/lab/maintenance-policy", nil)
		r.Header.Set("Authorization", "Bearer "+viewerToken)
		if gz {
			r.Header.Set("Accept-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		require.Equal(t, http.StatusOK, rec.Code)
		body := rec.Body.Bytes()
		if gz {
			require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"))
			zr, err := gzip.NewReader(rec.Body)
			require.NoError(t, err)
			body, err = io.ReadAll(zr)
			require.NoError(t, err)
		} else {
			require.Empty(t, rec.Header().Get("Content-Encoding"))
		}
		require.JSONEq(t, `{}`, string(body))
		require.Equal(t, "7", rec.Header().Get(api.IndexHeader), "the index header is kept")
	}
}
