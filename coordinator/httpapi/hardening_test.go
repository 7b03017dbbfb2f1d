package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// panickyMember panics where the API reads releases.
type panickyMember struct {
	fakeLeadership
	Authenticator
	ReleaseService
	adminTokens
}

func (m *panickyMember) AuthenticateToken(tok string) (api.Token, error) {
	return m.adminTokens.AuthenticateToken(tok)
}
func (m *panickyMember) IsLeader() bool          { return true }
func (m *panickyMember) AppliedIndex() uint64    { return 1 }
func (m *panickyMember) Releases() []api.Release { panic("boom") }

// requireProblem checks that an answer is a problem+json with a valid body
// and returns it.
func requireProblem(t *testing.T, rec *httptest.ResponseRecorder, status int, suffix string) *api.Problem {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	p := &api.Problem{}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), p), rec.Body.String())
	require.Equal(t, api.ProblemTypeBase+suffix, p.Type)
	require.Equal(t, status, p.Status)
	require.NotEmpty(t, p.Title)
	return p
}

func TestPanicAnswersTheInternalProblemAndIsLogged(t *testing.T) {
	var logs bytes.Buffer
	h := asAdmin(New(servicesOf(&panickyMember{}), Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/releases", nil))
	p := requireProblem(t, rec, http.StatusInternalServerError, api.ProblemInternal)
	require.NotContains(t, p.Detail, "boom", "the panic's value stays in the log")
	require.Contains(t, logs.String(), "boom")
	require.Contains(t, logs.String(), "goroutine", "the log has the stack")
}

func TestMetricsAnswersOnlyGetAndHead(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "molt_test_total", Help: "test"}))
	h := asAdmin(New(servicesOf(&tokensOnly{}), Config{Gatherer: reg}))
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(m, "/metrics", nil))
		require.Equal(t, http.StatusOK, rec.Code, m)
		if m == http.MethodGet {
			require.Contains(t, rec.Body.String(), "molt_test_total")
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodDelete, http.MethodPut, http.MethodPatch} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(m, "/metrics", strings.NewReader("x")))
		requireProblem(t, rec, http.StatusMethodNotAllowed, api.ProblemMethodNotAllowed)
		_, _ = io.Copy(io.Discard, rec.Body)
	}
}
