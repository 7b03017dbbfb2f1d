package coordinator_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/coordinator/httpapi"
)

// fuzzTarget is the API under fuzzing: one real member (Raft, state
// machine, leader loop) whose handler is called in-process.
type fuzzTarget struct {
	m       *member
	handler http.Handler
	routes  []string // "METHOD pattern", sorted
	agent   *x509.Certificate
	// background is set once a request started work the leader goes on
	// with by itself (an upgrade, a preflight run): from then on the
	// applied index and the state move without requests, and "a refused
	// request changes nothing but the audit log" can no longer be read
	// off them.
	background sync.Once
	noisy      bool
}

// fuzzHandler builds the handler the fuzz targets call. It is the one
// place that does: when the API's construction changes (another
// middleware in httpapi.New), adapt it here.
func fuzzHandler(m *member) (http.Handler, httpapi.Config) {
	cfg := m.apiConfig
	cfg.MaxPoll = 10 * time.Millisecond // long polls must not slow the fuzzer
	cfg.AuditRefusalBurst = 1 << 30     // every refusal recorded: each one's record is checked
	return httpapi.New(httpapi.ServicesOf(m.c), cfg), cfg
}

var (
	fuzzOnce sync.Once
	fuzzT    *fuzzTarget
)

// newFuzzTarget starts the member once per process: a leader with two
// releases, cluster "lab" and an enrolled agent of lab/cp-1.
func newFuzzTarget(f *testing.F) *fuzzTarget {
	ft := &fuzzTarget{}
	ft.m = startMemberAt(f, "m1", f.TempDir(), true, newFakeOps(), "", "127.0.0.1:0", nil, func(c *coordinator.Config) {
		c.MissingAfter = time.Hour // no liveness entries of their own during a run
		c.AuditMaxEntries = 100    // a small state to compare after every request
	})
	eventually(f, "leader", ft.m.c.IsLeader)
	registerLab(f, ft.m.client())
	cred, err := enrollAgent(context.Background(), ft.m.client(), ft.m.addr, "lab", "cp-1")
	require.NoError(f, err)
	ft.agent, err = x509.ParseCertificate(cred.cert.Certificate[0])
	require.NoError(f, err)
	var cfg httpapi.Config
	ft.handler, cfg = fuzzHandler(ft.m)
	for r := range httpapi.Requirements(cfg) {
		ft.routes = append(ft.routes, r)
	}
	slices.Sort(ft.routes)
	return ft
}

// fuzzSkipped are routes the fuzzer leaves alone because they end the
// run rather than test it: removing the member or the admin token, or
// joining a voter that answers TCP but not Raft (the member's own HTTP
// port), which costs the one-member coordinator its quorum. Their
// refusals have tests of their own (hardening_test.go, auth_test.go).
var fuzzSkipped = map[string]bool{
	"DELETE /v1/members/{id}": true,
	"DELETE /v1/tokens/{id}":  true,
	"POST /v1/members":        true,
}

var fuzzMethods = []string{"", "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "BREW"}

// FuzzAPI sends random requests to every route: the route, a method
// (the route's own or another), its path parameters, a query, a media
// type, a body, and who calls (an admin's token or lab/cp-1's agent
// certificate). Properties: no answer is 500 (a panic, or an error no
// status was chosen for); every answer that is not 2xx is a valid
// problem+json; a refused request changes nothing but the audit log: the
// state but for the audit log is as it was, and the Raft log grew by at
// most one entry, the request's audit record (a refused write by the
// admin or the agent; agents' own calls and reads are not recorded).
func FuzzAPI(f *testing.F) {
	fuzzOnce.Do(func() { fuzzT = newFuzzTarget(f) })
	ft := fuzzT
	for _, r := range ft.routes {
		agent := strings.Contains(r, "/agents/")
		f.Add(r, uint8(0), "lab", "cp-1", "x", "", "application/json", []byte(`{}`), agent)
	}
	f.Fuzz(func(t *testing.T, route string, method uint8, p1, p2, p3, query, ctype string, body []byte, asAgent bool) {
		// route names a route ("METHOD pattern", as in the seeds), or
		// picks one by its bytes.
		rt := route
		if _, ok := slices.BinarySearch(ft.routes, rt); !ok {
			h := 0
			for _, c := range []byte(route) {
				h = h*31 + int(c)
			}
			rt = ft.routes[(h%len(ft.routes)+len(ft.routes))%len(ft.routes)]
		}
		if fuzzSkipped[rt] {
			t.Skip()
		}
		m, pattern, _ := strings.Cut(rt, " ")
		if mm := fuzzMethods[int(method)%len(fuzzMethods)]; mm != "" {
			m = mm
		}
		params := []string{p1, p2, p3}
		var path strings.Builder
		for seg := range strings.SplitSeq(pattern, "/") {
			if seg == "" {
				continue
			}
			path.WriteByte('/')
			switch {
			case strings.HasPrefix(seg, "{") || seg == "*":
				path.WriteString(url.PathEscape(params[0]))
				params = append(params[1:], params[0])
			default:
				path.WriteString(seg)
			}
		}
		target := path.String()
		if query != "" {
			target += "?" + query
		}
		req, err := http.NewRequest(m, "https://molt.test"+target, bytes.NewReader(body))
		if err != nil {
			t.Skip()
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if asAgent {
			req.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{ft.agent}}}
		} else {
			req.Header.Set("Authorization", "Bearer "+testAdmin)
		}
		before := ft.m.mark()
		var stateBefore string
		if !ft.noisy {
			stateBefore, err = ft.m.c.StateWithoutAudit()
			require.NoError(t, err)
		}
		rec := httptest.NewRecorder()
		ft.handler.ServeHTTP(rec, req)
		after := ft.m.mark()

		code := rec.Code
		require.NotEqual(t, http.StatusInternalServerError, code, "%s %s: %s", m, target, rec.Body.String())
		if code >= 200 && code < 300 {
			if (pattern == "/v1/clusters/{name}/upgrade" || pattern == "/v1/clusters/{name}/preflight") && m == "POST" {
				ft.background.Do(func() { ft.noisy = true })
			}
			return
		}
		require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"), "%s %s: %d %s", m, target, code, rec.Body.String())
		if m != http.MethodHead {
			var p api.Problem
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p), "%s %s: %s", m, target, rec.Body.String())
			require.Equal(t, code, p.Status)
			require.True(t, strings.HasPrefix(p.Type, api.ProblemTypeBase), p.Type)
			require.NotEmpty(t, p.Title)
			require.NotContains(t, p.Detail, " at index ", "raftstore's wrapping stays in the log")
		}
		if !ft.noisy {
			stateAfter, err := ft.m.c.StateWithoutAudit()
			require.NoError(t, err)
			require.Equal(t, stateBefore, stateAfter, "%s %s refused (%d) but the state changed: %s", m, target, code, rec.Body.String())
			require.LessOrEqual(t, after.commands, before.commands+1, "%s %s refused (%d) but the log grew by more than its audit record: %s", m, target, code, rec.Body.String())
			if after.commands == before.commands+1 {
				e := ft.m.c.AuditLog(api.AuditQuery{Limit: 1}).Entries[0]
				require.Equal(t, after.index, e.Index, "the command is the audit record")
				require.Equal(t, []any{m, code, api.AuditRefused}, []any{e.Method, e.Status, e.Outcome}, "%+v", e)
				require.NotEmpty(t, e.Principal)
			}
		}
	})
}
