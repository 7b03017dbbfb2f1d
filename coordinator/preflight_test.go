package coordinator_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/preflight"
	"github.com/moltproject/molt/raftstore"
)

// TestPreflightRunAndUpgradeRefusal runs a preflight alone, then shows
// preflight as the replicated first step of an upgrade: the request answers
// 202 at once with the upgrade in state preflight; a blocking failure (one
// agent never runs) ends it refused, naming the checks, with spec, status
// and every node untouched; a passing run moves it to running.
func TestPreflightRunAndUpgradeRefusal(t *testing.T) {
	ops := newFakeOps()
	ctx, tc, cl, nodes := labWithAgents(t, ops)
	m := tc.members[0]

	// A preflight alone: 202 with its ID, then a passing report.
	var run api.PreflightRun
	code, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/preflight", map[string]string{"version": "1.34.4"}, &run)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, "lab-1", run.ID)
	eventually(t, "preflight done", func() bool {
		run = api.PreflightRun{}
		_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/preflight/lab-1", nil, &run)
		return err == nil && run.State == "done"
	})
	require.Equal(t, string(preflight.Passed), run.Report.Verdict, "%+v", run.Report.Results)
	require.Len(t, run.Report.Results, len(preflight.Checks()))
	for _, n := range nodes {
		require.Len(t, run.Operations[n], 2, "artifacts and peers on %s", n)
	}

	// A new cluster whose worker-2 agent never runs: the upgrade is refused.
	spec2 := clusterSpec("lab2", "1.33.6")
	put(t, cl, "/v1/clusters/lab2", spec2)
	startAgents(ctx, tc, "lab2", nodes[:len(nodes)-1], true)
	eventually(t, "agents registered", func() bool {
		c, err := m.c.Cluster("lab2")
		return err == nil && len(c.Status.Agents) == len(nodes)-1
	})
	calls, readyz := len(ops.Calls()), ops.readyzCount()
	versions := func() string {
		c, err := m.c.Cluster("lab2")
		require.NoError(t, err)
		return c.Spec.Version + " " + c.Status.Version
	}
	var u api.Upgrade
	code2, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab2/upgrade", api.UpgradeRequest{Version: "1.34.4"}, &u)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code2, "the request does not wait for preflight")
	require.Equal(t, api.UpgradePreflight, u.State)
	require.NotEmpty(t, u.Preflight)
	require.Equal(t, "1.33.6 1.33.6", versions(), "spec.version is set only after preflight passed")
	eventually(t, "upgrade refused", func() bool {
		u = api.Upgrade{}
		_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab2/upgrade", nil, &u)
		return err == nil && u.State == api.UpgradeRefused
	})
	require.Contains(t, u.RefusedChecks, preflight.IDAgentsReporting)
	require.Contains(t, u.RefusedChecks, preflight.IDArtifacts)
	require.Equal(t, readyz+1, ops.readyzCount(), "an unanswered artifact check blocks whatever a new reading finds: judged once")
	require.Equal(t, "1.33.6 1.33.6", versions(), "spec and status untouched")
	require.Equal(t, calls, len(ops.Calls()), "no node touched")
	c2, err := m.c.Cluster("lab2")
	require.NoError(t, err)
	require.Equal(t, "1.33.6", c2.Spec.Version)
	require.Equal(t, api.UpgradeRefused, c2.Status.Upgrade.State)
	var refusing api.PreflightRun
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab2/preflight/"+u.Preflight, nil, &refusing)
	require.NoError(t, err)
	require.Equal(t, string(preflight.Failed), refusing.Report.Verdict, "the run the refused upgrade names is the blocking one")

	// A refused upgrade does not block the next request; with every agent
	// reporting, the upgrade of lab moves from preflight to running on the
	// passing run it names, and only then is spec.version set.
	code3, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, &u)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code3)
	require.Equal(t, api.UpgradePreflight, u.State)
	eventually(t, "upgrade past preflight", func() bool {
		u = api.Upgrade{}
		_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/upgrade", nil, &u)
		return err == nil && u.State != api.UpgradePreflight
	})
	require.Equal(t, api.UpgradeRunning, u.State)
	var passing api.PreflightRun
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/preflight/"+u.Preflight, nil, &passing)
	require.NoError(t, err)
	require.NotEqual(t, string(preflight.Failed), passing.Report.Verdict)
	c1, err := m.c.Cluster("lab")
	require.NoError(t, err)
	require.Equal(t, "1.34.4", c1.Spec.Version)

	// The stored runs, newest first, without their host operations.
	var runs []api.PreflightRunSummary
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/preflight", nil, &runs)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	require.Equal(t, []string{u.Preflight, "lab-1"}, []string{runs[0].ID, runs[1].ID})
	require.Equal(t, api.PreflightRunSummary{ID: "lab-1", Cluster: "lab", Target: "1.34.4", State: "done",
		CreatedAt: run.CreatedAt, Deadline: run.Deadline, FinishedAt: run.FinishedAt, Hosts: len(nodes), Verdict: string(preflight.Passed)}, runs[1])
	var refused []api.PreflightRunSummary
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab2/preflight", nil, &refused)
	require.NoError(t, err)
	require.Len(t, refused, 1)
	require.Contains(t, refused[0].Failed, preflight.IDAgentsReporting)
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/nope/preflight", nil, &refused)
	var p *api.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusNotFound, p.Status)
}

// TestPreflightReadsAStalledAPIServerAgain: a /readyz that fails for two
// reads (an API server stalled for a few seconds) is read again and the
// run passes; one that keeps failing fails control-plane-health after
// WorkRetries+1 reads, naming what /readyz said.
func TestPreflightReadsAStalledAPIServerAgain(t *testing.T) {
	ops := newFakeOps()
	ctx, _, cl, _ := labWithAgents(t, ops)

	runPreflight := func() api.PreflightRun {
		t.Helper()
		var run api.PreflightRun
		_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/preflight", map[string]string{"version": "1.34.4"}, &run)
		require.NoError(t, err)
		id := run.ID
		eventually(t, "preflight "+id+" done", func() bool {
			run = api.PreflightRun{}
			_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/preflight/"+id, nil, &run)
			return err == nil && run.State == "done"
		})
		return run
	}
	controlPlane := func(run api.PreflightRun) api.PreflightResult {
		for _, r := range run.Report.Results {
			if r.Check == preflight.IDControlPlaneHealth {
				return r
			}
		}
		t.Fatalf("no %s result in %+v", preflight.IDControlPlaneHealth, run.Report.Results)
		return api.PreflightResult{}
	}

	ops.failReadyz(2)
	run := runPreflight()
	require.Equal(t, string(preflight.Passed), run.Report.Verdict, "%+v", run.Report.Results)
	require.Equal(t, "pass", controlPlane(run).Status)
	require.Equal(t, 3, ops.readyzCount(), "read until ready: two failures, then ready")

	ops.failReadyz(1000)
	run = runPreflight()
	require.Equal(t, string(preflight.Failed), run.Report.Verdict)
	cp := controlPlane(run)
	require.Equal(t, "fail", cp.Status)
	require.Contains(t, cp.Message, "etcd")
	require.Equal(t, 3+coordinator.DefaultConfig().WorkRetries+1, ops.readyzCount(), "read WorkRetries+1 times, then judged")
}

// labWithAgents starts one member over ops, registers cluster lab and
// runs an agent for each of its nodes until the test ends.
func labWithAgents(t *testing.T, ops *fakeOps) (context.Context, *testCluster, *client.Client, []string) {
	tc := newTestCluster(t, 1, ops)
	cl := tc.members[0].client()
	nodes := nodeNames(registerLab(t, cl))
	startAgents(t.Context(), tc, "lab", nodes, true)
	waitAgents(t, tc, "lab", len(nodes))
	return t.Context(), tc, cl, nodes
}

// TestPreflightInArtifactWaves: with the artifact checks bounded to two
// hosts at a time, a run over the lab's seven hosts still gets every
// host's answer and passes, and waits PreflightTimeout per wave.
func TestPreflightInArtifactWaves(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps(), func(c *coordinator.Config) { c.PreflightArtifactWave = 2 })
	cl := tc.members[0].client()
	nodes := nodeNames(registerLab(t, cl))
	startAgents(t.Context(), tc, "lab", nodes, true)
	waitAgents(t, tc, "lab", len(nodes))
	var run api.PreflightRun
	_, err := cl.Do(t.Context(), http.MethodPost, "/v1/clusters/lab/preflight", map[string]string{"version": "1.34.4"}, &run)
	require.NoError(t, err)
	require.Equal(t, 4*coordinator.PreflightTimeout, run.Deadline.Sub(run.CreatedAt), "seven hosts, two at a time")
	eventually(t, "preflight done", func() bool {
		run = api.PreflightRun{}
		_, err := cl.Do(t.Context(), http.MethodGet, "/v1/clusters/lab/preflight/lab-1", nil, &run)
		return err == nil && run.State == "done"
	})
	require.Equal(t, string(preflight.Passed), run.Report.Verdict, "%+v", run.Report.Results)
	require.Len(t, run.Results, 2*len(nodes), "every host answered both checks")
}

// TestPreflightFormsFollowTheMembers runs the same preflight on a
// coordinator whose members all read 0.2.0 and on one with a member that
// reads only what 0.1.0 reads, and reads each member's Raft log
// afterwards: the first writes the run's plan instead of its operations
// and batches results (command 48), the second writes what 0.1.0 reads
// (operations in the start entry, one entry per result); both store the
// same run, every result recorded.
func TestPreflightFormsFollowTheMembers(t *testing.T) {
	for _, old := range []bool{false, true} {
		t.Run(map[bool]string{false: "0.2.0", true: "a 0.1.0 member"}[old], func(t *testing.T) {
			tc := newTestCluster(t, 1, newFakeOps())
			m := tc.members[0]
			cl := m.client()
			if old {
				m2 := startMember(t, "m2", t.TempDir(), false, nil, "", func(cfg *coordinator.Config) {
					cfg.Capabilities = func() api.MemberCapabilities { return coordinator.Baseline }
				})
				tc.replace(append(tc.list(), m2))
				_, err := cl.Do(t.Context(), http.MethodPost, "/v1/members", api.JoinRequest{ID: m2.id, RaftAddr: m2.c.Store().RaftAddr(), HTTPAddr: m2.addr}, nil)
				require.NoError(t, err)
				eventually(t, "the leader heard m2 runs 0.1.0", func() bool {
					ms, err := m.c.Members()
					i := slices.IndexFunc(ms, func(x api.Member) bool { return x.ID == "m2" })
					return err == nil && i >= 0 && ms[i].Version == "0.1.0"
				})
			}
			nodes := nodeNames(registerLab(t, cl))
			startAgents(t.Context(), tc, "lab", nodes, true)
			waitAgents(t, tc, "lab", len(nodes))
			var run api.PreflightRun
			_, err := cl.Do(t.Context(), http.MethodPost, "/v1/clusters/lab/preflight", map[string]string{"version": "1.34.4"}, &run)
			require.NoError(t, err)
			eventually(t, "preflight done", func() bool {
				run = api.PreflightRun{}
				_, err := cl.Do(t.Context(), http.MethodGet, "/v1/clusters/lab/preflight/lab-1", nil, &run)
				return err == nil && run.State == "done"
			})
			require.Equal(t, string(preflight.Passed), run.Report.Verdict, "%+v", run.Report.Results)
			require.Len(t, run.Results, 2*len(nodes), "every host answered both checks")
			for _, n := range nodes {
				require.Len(t, run.Operations[n], 2, "artifacts and peers on %s", n)
			}
			m.stop(false)

			counts := map[raftstore.CommandType]int{}
			var start string
			for _, e := range commandsInLog(t, filepath.Join(m.dir, "wal")) {
				counts[e.typ]++
				if e.typ == statemachine.CmdPreflightStart {
					start = string(e.body)
				}
			}
			if old {
				require.Contains(t, start, `"preflight-lab-1-cp-1-peers"`, "the operations in the entry")
				require.NotContains(t, start, `"hostPlan"`)
				require.Equal(t, 2*len(nodes), counts[statemachine.CmdPreflightResult], "one entry per result")
				require.Zero(t, counts[statemachine.CmdPreflightResults])
				return
			}
			require.Contains(t, start, `"hostPlan":1`)
			require.Contains(t, start, `"operations":null`, "no operations in the entry")
			require.Zero(t, counts[statemachine.CmdPreflightResult])
			require.Positive(t, counts[statemachine.CmdPreflightResults], "results in batch entries")
		})
	}
}

// logEntry is one command entry of a stopped member's Raft log.
type logEntry struct {
	typ  raftstore.CommandType
	body []byte
}

// commandsInLog reads a stopped member's Raft log (its wal directory):
// every command entry, in order, an audited command as the command it
// carries. The test members keep their whole log.
func commandsInLog(t testing.TB, path string) []logEntry {
	s, err := wal.Open(path, wal.WithMetaStore(&metadb.BoltMetaDB{}))
	require.NoError(t, err)
	defer s.Close()
	first, err := s.FirstIndex()
	require.NoError(t, err)
	last, err := s.LastIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(1), first, "the log was compacted")
	var out []logEntry
	for i := first; i <= last; i++ {
		var l raft.Log
		require.NoError(t, s.GetLog(i, &l))
		if l.Type != raft.LogCommand {
			continue
		}
		typ, body, err := raftstore.Decode(l.Data)
		require.NoError(t, err)
		if typ == statemachine.CmdAudited {
			var a struct {
				Type    uint8           `json:"type"`
				Command json.RawMessage `json:"command"`
			}
			require.NoError(t, json.Unmarshal(body, &a))
			typ, body = raftstore.CommandType(a.Type), a.Command
		}
		out = append(out, logEntry{typ, body})
	}
	return out
}
