package coordinator_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/trust"
)

// tokenClient is a client of the member at addr with a new API token
// of role, made by the admin.
func tokenClient(t *testing.T, admin *client.Client, addr, role, description string) (*client.Client, api.Token) {
	t.Helper()
	var tok api.Token
	_, err := admin.Do(context.Background(), http.MethodPost, "/v1/tokens", api.TokenRequest{Kind: api.TokenAPI, Role: role, Description: description}, &tok)
	require.NoError(t, err)
	cl := client.New("https://"+addr, httpsClient(nil))
	cl.SetBearerToken(tok.Secret)
	// The member at addr may not have applied the token yet (a follower):
	// wait until it knows it, as a client that came back later would.
	eventually(t, "token "+tok.ID+" known at "+addr, func() bool {
		_, err := cl.Do(context.Background(), http.MethodGet, "/v1/releases", nil, nil)
		return err == nil
	})
	return cl, tok
}

// readAudit reads the whole audit log q selects through cl, pages of
// size at most 3 (to go through the paging too), newest first.
func readAudit(t *testing.T, cl *client.Client, q api.AuditQuery) []api.AuditEntry {
	t.Helper()
	q.Limit = 3
	var out []api.AuditEntry
	for {
		page, err := cl.Audit(context.Background(), q)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Entries), 3)
		out = append(out, page.Entries...)
		if page.Next == 0 {
			return out
		}
		q.Before = page.Next
	}
}

// TestAuditLogRecordsEveryWrite performs writes as an admin at the
// leader and as an operator through a follower (forwarded), a write
// refused for its role and one for its content, an emergency override
// that names someone else, reads and a dry run, and anonymous and
// unauthenticated requests; then reads the audit log from the follower.
// Every write is there once, with the authenticated principal, its role
// and its outcome; nothing else is.
func TestAuditLogRecordsEveryWrite(t *testing.T) {
	tc := newTestCluster(t, 3, newFakeOps())
	l := tc.waitLeader()
	var f *member
	for _, m := range tc.list() {
		if m != l {
			f = m
			break
		}
	}
	ctx := context.Background()
	admin := l.client()
	registerLab(t, admin)
	put(t, admin, "/v1/releases/1.33.7", release("1.33.7"))
	op, opTok := tokenClient(t, admin, f.addr, "operator", "oncall-bot")
	viewer, _ := tokenClient(t, admin, f.addr, "viewer", "dashboard")

	// Through the follower, forwarded to the leader.
	_, err := op.Do(ctx, http.MethodPut, "/v1/clusters/lab/maintenance-policy", map[string]any{}, nil)
	require.NoError(t, err)
	_, err = op.Do(ctx, http.MethodPut, "/v1/releases/1.35.0", release("1.35.0"), nil)
	require.True(t, api.IsProblem(err, api.ProblemForbidden), "%v", err)
	_, err = op.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.99.0"}, nil)
	require.True(t, api.IsProblem(err, api.ProblemVersionUnknown), "%v", err)
	_, err = op.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.33.7", DryRun: true}, nil)
	require.NoError(t, err)
	var up api.Upgrade
	st, err := op.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.33.7", Automatic: true,
		Emergency: &api.Emergency{Reason: "CVE-2026-9999 in kubelet", By: "mallory"}}, &up)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, st)
	// Reads, and callers without a valid credential: never recorded.
	_, err = viewer.Do(ctx, http.MethodGet, "/v1/clusters", nil, nil)
	require.NoError(t, err)
	for i := range 30 {
		m := []*member{l, f}[i%2]
		code, _ := call(t, m.addr, http.MethodPut, "/v1/releases/1.36.0", "", nil, "{}")
		require.Equal(t, http.StatusUnauthorized, code)
		code, _ = call(t, m.addr, http.MethodDelete, "/v1/clusters/lab", "zzzzzz.0123456789abcdef0123456789abcdef", nil, "")
		require.Equal(t, http.StatusUnauthorized, code)
	}

	// From the follower's replica: its client has seen the operator's
	// writes; the admin's came earlier through the leader.
	eventually(t, "the follower applied the leader's state", func() bool { return f.c.AppliedIndex() >= l.c.AppliedIndex() })
	fcl := adminClient(f.addr)
	all := readAudit(t, fcl, api.AuditQuery{})
	// The members' joins are the admin's too (newTestCluster), below.
	var ops []api.AuditEntry
	joins := 0
	for _, e := range all {
		if e.Route == "/v1/members" {
			require.Equal(t, http.StatusOK, e.Status, "%+v", e)
			joins++
			continue
		}
		ops = append(ops, e)
	}
	require.GreaterOrEqual(t, joins, 2, "two members joined")

	adminName := "token:" + testAdminRec.ID + " (bootstrap admin)"
	opName := "token:" + opTok.ID + " (oncall-bot)"
	type seen struct {
		principal, method, path string
		status                  int
		rule                    string
	}
	var got []seen
	for _, e := range ops {
		got = append(got, seen{e.Principal, e.Method, e.Path, e.Status, e.Rule})
		require.NotZero(t, e.Index)
		require.False(t, e.Time.IsZero())
		require.NotContains(t, fmt.Sprintf("%+v", e), "mallory", "a name the request states is not recorded")
	}
	require.Equal(t, []seen{
		{opName, "POST", "/v1/clusters/lab/upgrade", 202, ""},
		{opName, "POST", "/v1/clusters/lab/upgrade", 422, "version-unknown"},
		{opName, "PUT", "/v1/releases/1.35.0", 403, "role-admin"},
		{opName, "PUT", "/v1/clusters/lab/maintenance-policy", 200, ""},
		{adminName, "POST", "/v1/tokens", 201, ""},
		{adminName, "POST", "/v1/tokens", 201, ""},
		{adminName, "PUT", "/v1/releases/1.33.7", 200, ""},
		{adminName, "PUT", "/v1/clusters/lab", 200, ""},
		{adminName, "PUT", "/v1/releases/1.34.4", 200, ""},
		{adminName, "PUT", "/v1/releases/1.33.6", 200, ""},
	}, got, "newest first; the forwarded write once; no read, dry run, anonymous or unauthenticated request")

	override, refusal, cluster, token := ops[0], ops[2], ops[7], ops[5]
	require.Equal(t, "CVE-2026-9999 in kubelet", override.Reason)
	require.Equal(t, "operator", override.Role)
	require.Equal(t, "lab", override.Cluster)
	require.Equal(t, "/v1/clusters/{name}/upgrade", override.Route)
	require.Equal(t, "1.33.6 → 1.33.7, automatic, emergency override", override.Detail)
	require.Equal(t, api.AuditOK, override.Outcome)
	require.Equal(t, api.ProblemTypeBase+api.ProblemForbidden, refusal.Problem)
	require.Equal(t, api.AuditRefused, refusal.Outcome)
	require.Equal(t, "with a kubeconfig (sealed)", cluster.Detail)
	require.NotContains(t, fmt.Sprintf("%+v", all), "apiVersion", "no kubeconfig in the log")
	require.Equal(t, fmt.Sprintf("API token %s, role operator", opTok.ID), token.Detail)

	// Filters, read at the follower.
	require.Len(t, readAudit(t, fcl, api.AuditQuery{Principal: "token:" + opTok.ID}), 4)
	require.Len(t, readAudit(t, fcl, api.AuditQuery{Cluster: "lab"}), 4, "the cluster, the policy, the refused and the started upgrade")
	since := readAudit(t, fcl, api.AuditQuery{Since: override.Time})
	require.Equal(t, override.Seq, since[0].Seq)
	require.Empty(t, readAudit(t, fcl, api.AuditQuery{Since: override.Time.Add(time.Nanosecond)}))
	oldest := all[len(all)-1]
	for _, e := range readAudit(t, fcl, api.AuditQuery{Until: ops[len(ops)-1].Time}) {
		require.True(t, e.Time.Before(ops[len(ops)-1].Time), "until is exclusive")
		require.Equal(t, "/v1/members", e.Route, "only the joins came before the first release")
	}
	require.Equal(t, oldest.Seq, readAudit(t, fcl, api.AuditQuery{Until: oldest.Time.Add(time.Nanosecond)})[0].Seq)
	_, err = fcl.Do(ctx, http.MethodGet, "/v1/audit?since=yesterday", nil, nil)
	require.True(t, api.IsProblem(err, api.ProblemValidation), "%v", err)
	_, err = op.Audit(ctx, api.AuditQuery{})
	require.True(t, api.IsProblem(err, api.ProblemForbidden), "admins only: %v", err)
}

// TestAuditRecordSurvivesTheLeader: a write and its record are one Raft
// entry, so a write a client saw succeed has its record on every member,
// even when the leader dies right after answering.
func TestAuditRecordSurvivesTheLeader(t *testing.T) {
	tc := newTestCluster(t, 3, newFakeOps())
	l := tc.waitLeader()
	admin := l.client()
	registerLab(t, admin)
	put(t, admin, "/v1/releases/1.34.5", release("1.34.5"))
	answered := admin.Seen()
	l.stop(true) // a crash, right after the answer
	nl := tc.waitLeader()
	for _, m := range tc.alive() {
		eventually(t, m.id+" has the release", func() bool { _, err := m.c.Release("1.34.5"); return err == nil })
		entries := m.c.AuditLog(api.AuditQuery{Principal: "token:" + testAdminRec.ID, Limit: 1}).Entries
		require.Len(t, entries, 1, m.id)
		e := entries[0]
		require.Equal(t, "/v1/releases/1.34.5", e.Path, m.id)
		require.Equal(t, http.StatusOK, e.Status)
		require.LessOrEqual(t, e.Index, answered, "recorded before the answer")
	}
	require.NotEqual(t, l, nl)
}

// TestAuditOfMembersAndAgents: membership changes, which are not commands
// of the state machine, are recorded on their own; an agent's enrollment
// and renewal with its certificate's serials, in the agents' class.
func TestAuditOfMembersAndAgents(t *testing.T) {
	tc := newTestCluster(t, 2, newFakeOps())
	l := tc.waitLeader()
	admin := l.client()
	registerLab(t, admin)
	ctx := context.Background()
	cred, err := enrollAgent(ctx, admin, l.addr, "lab", "cp-1")
	require.NoError(t, err)
	key, err := trust.NewKey()
	require.NoError(t, err)
	csr, err := trust.NewCSR(trust.AgentIdentity("lab", "cp-1"), key)
	require.NoError(t, err)
	var renewed api.EnrollResponse
	_, err = cred.client(l.addr).Do(ctx, http.MethodPost, "/v1/agents/lab/cp-1/certificate", api.RenewRequest{CSR: string(csr)}, &renewed)
	require.NoError(t, err)

	all := readAudit(t, admin, api.AuditQuery{})
	require.Equal(t, "agent:lab/cp-1", all[0].Principal)
	require.Equal(t, "agent", all[0].PrincipalKind)
	require.Equal(t, "cp-1", all[0].Node)
	require.True(t, strings.HasPrefix(all[0].Detail, "certificate serial "), all[0].Detail)
	require.True(t, strings.HasPrefix(all[1].Principal, "bootstrap-token:"), all[1].Principal)
	require.Equal(t, "/v1/agents/enroll", all[1].Path)
	require.Equal(t, []string{"lab", "cp-1"}, []string{all[1].Cluster, all[1].Node})
	require.Equal(t, "/v1/tokens", all[2].Path, "the bootstrap token's creation")
	require.Contains(t, all[2].Detail, "bootstrap token")
	require.Equal(t, "lab", all[2].Cluster)

	// The second member joined at the start: recorded by the first.
	var joins []api.AuditEntry
	for _, e := range all {
		if e.Route == "/v1/members" {
			joins = append(joins, e)
		}
	}
	require.NotEmpty(t, joins)
	require.Equal(t, http.StatusOK, joins[0].Status)
	require.Contains(t, joins[0].Detail, "member m2")
}

// TestAuditRetentionSetting: the member's setting bounds the log it
// proposes records for; settings out of bounds keep a member from
// starting.
func TestAuditRetentionSetting(t *testing.T) {
	m := startMember(t, "m1", t.TempDir(), true, newFakeOps(), "", func(c *coordinator.Config) { c.AuditMaxEntries = 3 })
	eventually(t, "leader", m.c.IsLeader)
	cl := m.client()
	for _, v := range []string{"1.33.6", "1.33.7", "1.33.8", "1.34.4", "1.34.5"} {
		put(t, cl, "/v1/releases/"+v, release(v))
	}
	got := readAudit(t, cl, api.AuditQuery{})
	require.Len(t, got, 3)
	require.Equal(t, "/v1/releases/1.34.5", got[0].Path)
	require.Equal(t, "/v1/releases/1.33.8", got[2].Path)
	require.Equal(t, uint64(5), got[0].Seq, "numbers go on")

	for _, bad := range []func(*coordinator.Config){
		func(c *coordinator.Config) { c.AuditMaxEntries = -1 },
		func(c *coordinator.Config) { c.AuditMaxEntries = 2_000_000 },
		func(c *coordinator.Config) { c.AuditMaxAge = time.Minute },
	} {
		cfg := coordinator.DefaultConfig()
		cfg.Raft.DataDir = t.TempDir()
		bad(&cfg)
		_, err := coordinator.New(cfg)
		require.ErrorContains(t, err, "audit log")
	}
}
