package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// auditLog is a fake coordinator's audit log of n records, newest
// first, served by GET /v1/audit with its paging; queries keeps every
// query it was sent.
type auditLog struct {
	entries []api.AuditEntry
	queries []url.Values
}

func (l *auditLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/audit" {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	l.queries = append(l.queries, q)
	limit, _ := strconv.Atoi(q.Get("limit"))
	before, _ := strconv.ParseUint(q.Get("before"), 10, 64)
	var page api.AuditPage
	for _, e := range l.entries {
		if before != 0 && e.Seq >= before {
			continue
		}
		if len(page.Entries) == limit {
			page.Next = page.Entries[len(page.Entries)-1].Seq
			break
		}
		page.Entries = append(page.Entries, e)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(page)
}

func sampleAudit() []api.AuditEntry {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	return []api.AuditEntry{
		{Seq: 7, Index: 90, Time: t0.Add(5 * time.Minute), Principal: "token:k3x9q2 (oncall)", PrincipalKind: "operator", Role: "operator",
			Method: "POST", Route: "/v1/clusters/{name}/upgrade", Path: "/v1/clusters/lab/upgrade", Cluster: "lab", Status: 202, Outcome: api.AuditOK,
			Reason: "CVE-2026-1234 in kubelet", Detail: "1.34.4 → 1.34.5, emergency override"},
		{Seq: 6, Index: 88, Time: t0.Add(4 * time.Minute), Principal: "token:v1ew3r (dashboard)", PrincipalKind: "operator", Role: "viewer",
			Method: "DELETE", Route: "/v1/clusters/{name}", Path: "/v1/clusters/lab", Cluster: "lab", Status: 403, Outcome: api.AuditRefused,
			Problem: api.ProblemTypeBase + api.ProblemForbidden, Rule: "role-admin", Suppressed: 12},
		{Seq: 5, Index: 80, Time: t0.Add(3 * time.Minute), Principal: "agent:lab/worker-1", PrincipalKind: "agent",
			Method: "POST", Route: "/v1/agents/{cluster}/{node}/certificate", Path: "/v1/agents/lab/worker-1/certificate", Cluster: "lab", Node: "worker-1",
			Status: 200, Outcome: api.AuditOK, Detail: "certificate serial 0b → 0d"},
		{Seq: 4, Index: 70, Time: t0.Add(2 * time.Minute), Principal: "token:adm1n0 (bootstrap admin)", PrincipalKind: "operator", Role: "admin",
			Method: "POST", Route: "/v1/members", Path: "/v1/members", Status: 503, Outcome: api.AuditFailed, Problem: api.ProblemTypeBase + api.ProblemUnavailable},
		{Seq: 3, Index: 60, Time: t0.Add(time.Minute), Principal: "token:adm1n0 (bootstrap admin)", PrincipalKind: "operator", Role: "admin",
			Method: "POST", Route: "/v1/tokens", Path: "/v1/tokens", Status: 201, Outcome: api.AuditOK, Detail: "API token k3x9q2, role operator"},
		{Seq: 2, Time: t0.Add(-time.Hour), Cluster: "lab", Outcome: api.AuditOK, Action: "pool-cancel", Detail: "workers"},
		{Seq: 1, Time: t0.Add(-2 * time.Hour), Cluster: "lab", Outcome: api.AuditOK, Action: "maintenance-policy", Detail: "window=true exclusions=0"},
	}
}

func runAudit(t *testing.T, l *auditLog, args ...string) (string, error) {
	t.Helper()
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	var out bytes.Buffer
	root := (&cli{out: &out}).root()
	root.SetArgs(append([]string{"--server", srv.URL, "audit"}, args...))
	err := root.Execute()
	return out.String(), err
}

// TestAuditTable pins the table view: requests, refusals with their rule,
// an override's reason, left-out refusals, records of the old trail, and
// how to read on.
func TestAuditTable(t *testing.T) {
	out, err := runAudit(t, &auditLog{entries: sampleAudit()}, "--limit", "6")
	require.NoError(t, err)
	golden := filepath.Join("testdata", "audit.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run with -update to create it")
	require.Equal(t, string(want), out)
}

// TestAuditQueryAndPaging: filters go to the API as its query; --limit
// beyond one page reads on with before=; -o json prints the page with
// where to read on.
func TestAuditQueryAndPaging(t *testing.T) {
	l := &auditLog{entries: sampleAudit()}
	out, err := runAudit(t, l, "--cluster", "lab", "--principal", "token:k3x9q2", "--since", "2026-11-23T12:00:00Z", "--until", "2026-11-24T00:00:00Z", "--before", "9", "--limit", "3", "-o", "json")
	require.NoError(t, err)
	require.Equal(t, []url.Values{{"cluster": {"lab"}, "principal": {"token:k3x9q2"}, "since": {"2026-11-23T12:00:00Z"}, "until": {"2026-11-24T00:00:00Z"},
		"before": {"9"}, "limit": {"3"}}}, l.queries, "the fake applies only before and limit; the API's filters are its own tests'")
	var page api.AuditPage
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Equal(t, []uint64{7, 6, 5}, []uint64{page.Entries[0].Seq, page.Entries[1].Seq, page.Entries[2].Seq})
	require.Equal(t, uint64(5), page.Next)

	l = &auditLog{entries: sampleAudit()}
	out, err = runAudit(t, l, "--limit", "2500", "-o", "yaml")
	require.NoError(t, err)
	require.Len(t, l.queries, 1, "the log's end comes before the limit")
	require.Equal(t, "1000", l.queries[0].Get("limit"), "a page is at most the API's maximum")
	require.Contains(t, out, "action: maintenance-policy")

	_, err = runAudit(t, &auditLog{}, "--since", "yesterday")
	require.ErrorContains(t, err, `--since: "yesterday" is neither an RFC 3339 time`)
	_, err = runAudit(t, &auditLog{}, "--limit", "0")
	require.ErrorContains(t, err, "--limit 0")
}

func TestAuditPagesUpToTheLimit(t *testing.T) {
	var many []api.AuditEntry
	for seq := uint64(2500); seq >= 1; seq-- {
		many = append(many, api.AuditEntry{Seq: seq, Outcome: api.AuditOK, Method: "PUT", Path: "/v1/releases/1.34.4", Status: 200})
	}
	l := &auditLog{entries: many}
	out, err := runAudit(t, l, "--limit", "1500", "-o", "json")
	require.NoError(t, err)
	require.Len(t, l.queries, 2)
	require.Equal(t, url.Values{"limit": {"500"}, "before": {"1501"}}, l.queries[1])
	var page api.AuditPage
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Entries, 1500)
	require.Equal(t, uint64(1001), page.Entries[1499].Seq)
	require.Equal(t, uint64(1001), page.Next)
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"":                     {},
		"24h":                  now.Add(-24 * time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"2026-11-20T08:00:00Z": time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC),
	} {
		got, err := parseWhen(in, now)
		require.NoError(t, err, in)
		require.True(t, want.Equal(got), "%s: %s", in, got)
	}
	for _, bad := range []string{"-1h", "tomorrow", "2026-11-20"} {
		_, err := parseWhen(bad, now)
		require.Error(t, err, bad)
	}
}
