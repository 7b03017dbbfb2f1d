package coordinator_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/maintenance"
)

// refusal is a request the API must refuse with a problem naming its rule,
// without a Raft entry but its audit record.
type refusal struct {
	name, method, path, body string
	status                   int
	suffix, rule             string
}

// requireRefusals sends each refusal to m and checks the answer, that the
// one entry it added is its audit record (the refusal, its rule, the admin
// who asked: refusals change nothing but the audit log), and that the
// problem's detail does not leak raftstore's "command N at index M".
func requireRefusals(t *testing.T, m *member, rs []refusal) {
	t.Helper()
	for _, r := range rs {
		t.Run(r.name, func(t *testing.T) {
			before := m.mark()
			ctype := ""
			if r.body != "" {
				ctype = "application/json"
			}
			code, prob, body := raw(t, m, r.method, r.path, ctype, []byte(r.body))
			require.Equal(t, r.status, code, string(body))
			require.Equal(t, api.ProblemTypeBase+r.suffix, prob.Type, string(body))
			require.Equal(t, r.rule, prob.Rule, string(body))
			require.NotContains(t, prob.Detail, " at index ", "raftstore's wrapping stays in the log")
			if strings.Contains(r.body, `"dryRun":true`) {
				require.Equal(t, before, m.mark(), "a dry run is not a write: refused, it is not even recorded")
				return
			}
			requireOnlyAuditRecord(t, m, before, r.method, r.path, r.status, r.rule)
		})
	}
}

// requireOnlyAuditRecord checks that the one Raft entry since index
// before is the audit record of a refused request: method, path, status,
// rule, and the admin who sent it.
func requireOnlyAuditRecord(t *testing.T, m *member, before logMark, method, path string, status int, rule string) {
	t.Helper()
	now := m.mark()
	require.Equal(t, before.commands+1, now.commands, "a refused request became a command besides its audit record")
	e := m.c.AuditLog(api.AuditQuery{Limit: 1}).Entries[0]
	require.Equal(t, now.index, e.Index, "the one command is the audit record")
	require.Greater(t, e.Index, before.index)
	require.Equal(t, []any{method, path, status, rule, api.AuditRefused, "token:" + testAdminRec.ID + " (bootstrap admin)"},
		[]any{e.Method, e.Path, e.Status, e.Rule, e.Outcome, e.Principal})
}

func unreachableAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func TestJoinRefusals(t *testing.T) {
	tc := newTestCluster(t, 1, nil)
	m := tc.members[0]
	leaderRaft := m.c.Store().RaftAddr()
	js := func(r api.JoinRequest) string { b, _ := json.Marshal(r); return string(b) }
	requireRefusals(t, m, []refusal{
		{"the leader's ID at another HTTP address", "POST", "/v1/members", js(api.JoinRequest{ID: m.id, RaftAddr: leaderRaft, HTTPAddr: "evil.example:443"}), 409, api.ProblemConflict, "member-exists"},
		{"the leader's ID at its own addresses", "POST", "/v1/members", js(api.JoinRequest{ID: m.id, RaftAddr: leaderRaft, HTTPAddr: m.addr}), 409, api.ProblemConflict, "member-exists"},
		{"the leader's Raft address under another ID", "POST", "/v1/members", js(api.JoinRequest{ID: "m9", RaftAddr: leaderRaft, HTTPAddr: "127.0.0.1:1"}), 409, api.ProblemConflict, "member-exists"},
		{"an unreachable voter", "POST", "/v1/members", js(api.JoinRequest{ID: "m9", RaftAddr: unreachableAddr(t), HTTPAddr: "127.0.0.1:1"}), 422, api.ProblemValidation, "member-unreachable"},
		{"no port", "POST", "/v1/members", js(api.JoinRequest{ID: "m9", RaftAddr: "127.0.0.1"}), 422, api.ProblemValidation, "member"},
		{"port out of range", "POST", "/v1/members", js(api.JoinRequest{ID: "m9", RaftAddr: "127.0.0.1:70000"}), 422, api.ProblemValidation, "member"},
		{"an ID with a slash", "POST", "/v1/members", js(api.JoinRequest{ID: "m/9", RaftAddr: "127.0.0.1:7"}), 422, api.ProblemValidation, "member"},
	})
	ms, err := m.c.Members()
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, m.addr, ms[0].HTTPAddr, "the leader's HTTP address is its own")
	code, _, _ := raw(t, m, http.MethodGet, "/readyz", "", nil)
	require.Equal(t, 200, code)
}

func TestJoinOfAMemberAtOtherAddressesIsRefused(t *testing.T) {
	tc := newTestCluster(t, 2, nil)
	l := tc.waitLeader()
	var f *member
	for _, m := range tc.list() {
		if m != l {
			f = m
		}
	}
	js := func(r api.JoinRequest) string { b, _ := json.Marshal(r); return string(b) }
	requireRefusals(t, l, []refusal{
		{"another HTTP address", "POST", "/v1/members", js(api.JoinRequest{ID: f.id, RaftAddr: f.c.Store().RaftAddr(), HTTPAddr: "evil.example:443"}), 409, api.ProblemConflict, "member-exists"},
		{"another Raft address", "POST", "/v1/members", js(api.JoinRequest{ID: f.id, RaftAddr: unreachableAddr(t), HTTPAddr: f.addr}), 409, api.ProblemConflict, "member-exists"},
	})
	// The same join again is idempotent.
	code, prob, _ := raw(t, l, http.MethodPost, "/v1/members", "application/json", []byte(js(api.JoinRequest{ID: f.id, RaftAddr: f.c.Store().RaftAddr(), HTTPAddr: f.addr})))
	require.Equal(t, 200, code, "%v", prob)
}

func TestRefusedWritesAreRefusedBeforeTheLog(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps())
	m := tc.members[0]
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/clusters/lab", clusterSpec("lab", "1.33.6"))
	requireRefusals(t, m, []refusal{
		{"retry in an unknown cluster", "POST", "/v1/clusters/nope/nodes/cp-1/retry", "", 404, api.ProblemNotFound, ""},
		{"retry without an upgrade", "POST", "/v1/clusters/lab/nodes/cp-1/retry", "", 409, api.ProblemNoUpgrade, ""},
		{"delete an unknown cluster", "DELETE", "/v1/clusters/nope", "", 404, api.ProblemNotFound, ""},
		{"a command on an unknown pool", "POST", "/v1/clusters/lab/pools/nope/upgrade/cancel", "{}", 404, api.ProblemNotFound, ""},
		{"a command without an upgrade", "POST", "/v1/clusters/lab/pools/workers/upgrade/cancel", "{}", 409, api.ProblemNoUpgrade, ""},
		{"a user cluster of an unknown admin", "PUT", "/v1/clusters/u1", `{"kind":"user","adminCluster":"nope","version":"1.33.6","pools":[{"name":"cp","role":"controlPlane","nodes":[{"name":"n1"}]}]}`, 422, api.ProblemValidation, "admin-cluster"},
		{"a cluster's version moved by hand", "PUT", "/v1/clusters/lab", string(mustJSON(t, clusterSpec("lab", "1.34.4"))), 422, api.ProblemValidation, "cluster-version"},
		{"a registration with an invalid policy", "PUT", "/v1/clusters/shop", `{"kind":"standalone","version":"1.33.6","pools":[{"name":"cp","role":"controlPlane","nodes":[{"name":"n1"}]}],` +
			`"maintenancePolicy":{"exclusions":[{"name":"x","start":"2030-01-02T00:00:00Z","end":"2030-01-01T00:00:00Z"}]}}`, 422, api.ProblemPolicyInvalid, maintenance.RuleExclusionEndBeforeStart},
	})

	// A result for an upgrade the cluster never had is not found, and
	// reaches no log.
	before := m.mark()
	err := m.c.ReportResult(context.Background(), "lab", "cp-1", api.OperationResult{ID: "lab-9.9.9-1/cp-1/0/a0", State: api.OpSucceeded})
	require.ErrorIs(t, err, coordinator.ErrNotFound)
	err = m.c.ReportResult(context.Background(), "nope", "cp-1", api.OperationResult{ID: "nope-1.34.4-1/cp-1/0/a0", State: api.OpSucceeded})
	require.ErrorIs(t, err, coordinator.ErrNotFound)
	_, err = m.c.Register(context.Background(), api.RegisterRequest{Cluster: "lab", Node: "nope"})
	require.ErrorIs(t, err, coordinator.ErrNotFound)
	require.Equal(t, before, m.mark(), "agents' calls are not recorded: nothing at all reached the log")
}

func TestRequestBoundsAndNames(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps())
	m := tc.members[0]
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	put(t, cl, "/v1/clusters/lab", clusterSpec("lab", "1.33.6"))
	spec := func(name string, mutate func(*api.ClusterSpec)) string {
		s := clusterSpec(name, "1.33.6")
		if mutate != nil {
			mutate(&s)
		}
		return string(mustJSON(t, s))
	}
	many := make([]string, 17)
	for i := range many {
		many[i] = "c"
	}
	requireRefusals(t, m, []refusal{
		{"concurrentWorkerPools 2^62", "POST", "/v1/clusters/lab/upgrade", `{"version":"1.34.4","concurrentWorkerPools":4611686018427387904}`, 422, api.ProblemValidation, "concurrent-worker-pools"},
		{"concurrentWorkerPools 2e8 in a dry run", "POST", "/v1/clusters/lab/upgrade", `{"version":"1.34.4","dryRun":true,"concurrentWorkerPools":200000000}`, 422, api.ProblemValidation, "concurrent-worker-pools"},
		{"negative concurrentWorkerPools", "POST", "/v1/clusters/lab/upgrade", `{"version":"1.34.4","concurrentWorkerPools":-1}`, 422, api.ProblemValidation, "concurrent-worker-pools"},
		{"cluster named -", "PUT", "/v1/clusters/-", spec("-", nil), 422, api.ProblemValidation, "cluster-name"},
		{"cluster named .", "PUT", "/v1/clusters/.", spec(".", nil), 422, api.ProblemValidation, "cluster-name"},
		{"cluster named ..", "PUT", "/v1/clusters/..", spec("..", nil), 422, api.ProblemValidation, "cluster-name"},
		{"node named .", "PUT", "/v1/clusters/lab2", spec("lab2", func(s *api.ClusterSpec) { s.Pools[len(s.Pools)-1].Nodes[0].Name = "." }), 422, api.ProblemValidation, "node-name"},
		{"huge concurrentNodes", "PUT", "/v1/clusters/lab2", spec("lab2", func(s *api.ClusterSpec) { s.Pools[len(s.Pools)-1].Settings.ConcurrentNodes = 1 << 62 }), 422, api.ProblemValidation, "concurrent-nodes"},
		{"too many channels", "PUT", "/v1/releases/1.37.0", string(mustJSON(t, api.Release{Version: "1.37.0", Channels: many})), 422, api.ProblemValidation, "release-limits"},
	})
}
