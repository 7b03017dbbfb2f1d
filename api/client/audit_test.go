package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
)

// TestClientAudit: the query is sent as GET /v1/audit's parameters (only
// those set), and the page comes back decoded.
func TestClientAudit(t *testing.T) {
	var got []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/audit", r.URL.Path)
		got = append(got, r.URL.Query())
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(api.AuditPage{Entries: []api.AuditEntry{{Seq: 7, Principal: "token:abc", Status: 403, Outcome: api.AuditRefused, Rule: "role-admin"}}, Next: 7})
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, nil)
	since := time.Date(2026, 11, 23, 12, 0, 0, 500, time.UTC)
	page, err := c.Audit(context.Background(), api.AuditQuery{Cluster: "lab", Principal: "token:abc", Since: since, Before: 9, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, uint64(7), page.Next)
	require.Equal(t, "role-admin", page.Entries[0].Rule)
	_, err = c.Audit(context.Background(), api.AuditQuery{})
	require.NoError(t, err)
	require.Equal(t, []url.Values{
		{"cluster": {"lab"}, "principal": {"token:abc"}, "since": {"2026-11-23T12:00:00.0000005Z"}, "before": {"9"}, "limit": {"2"}},
		{},
	}, got)
}

func TestAuditOutcome(t *testing.T) {
	for status, want := range map[int]string{0: api.AuditOK, 200: api.AuditOK, 204: api.AuditOK, 403: api.AuditRefused, 429: api.AuditRefused, 503: api.AuditFailed} {
		require.Equal(t, want, api.AuditOutcome(status), "%d", status)
	}
}
