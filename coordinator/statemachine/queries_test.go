package statemachine

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
)

// machineAt is a machine that applied the golden log's first n entries.
func machineAt(t *testing.T, n int) *Machine {
	t.Helper()
	f, _ := replay(t, encodeEntries(t, goldenEntries()[:n], 1))
	return f
}

// firstOf is the index in goldenEntries of the first command of type typ.
func firstOf(t *testing.T, typ raftstore.CommandType) int {
	t.Helper()
	for i, e := range goldenEntries() {
		if e.cmd.Type() == typ {
			return i
		}
	}
	t.Fatalf("golden log has no command of type %s", typ)
	return 0
}

// TestQueriesReturnCopies changes everything the queries return and checks
// that the state, snapshotted before and after, did not change.
func TestQueriesReturnCopies(t *testing.T) {
	f := machineAt(t, len(goldenEntries()))
	before, err := f.Snapshot()
	require.NoError(t, err)

	r, err := f.Cluster("lab")
	require.NoError(t, err)
	require.Nil(t, r.Preflights, "Cluster leaves the preflight runs out")
	require.Equal(t, 2, r.PreflightSeq, "PreflightSeq is kept")
	r.Spec.Pools[0].Name = "changed"
	r.Spec.Pools[0].Nodes = nil
	r.Upgrade.Nodes[0].State = phases.StateFailed
	r.Upgrade.Steps[0].State = phases.StateFailed
	r.Upgrade.Pools[0].Cancelled = true
	r.History[0].ID = "changed"
	r.Agents["cp-1"].Missing = true
	r.Policy.Window = nil
	delete(r.Agents, "worker-1")

	for _, rec := range f.Clusters() {
		rec.Agents["cp-1"] = &AgentRecord{}
		if rec.Upgrade != nil {
			rec.Upgrade.Nodes[0].Cursor = 99
		}
	}
	u, err := f.Upgrade("lab")
	require.NoError(t, err)
	u.Nodes[0].Cursor, u.State = 99, phases.UpgradeFailed
	for _, a := range f.ActiveUpgrades() {
		a.Upgrade.Nodes[0].Cursor = 99
		a.Release.Version = "changed"
		if a.Policy != nil {
			a.Policy.Window = nil
		}
	}
	run, err := f.Preflight("lab", "lab-1")
	require.NoError(t, err)
	run.Results["preflight-lab-1-cp-1-peers"] = api.OperationResult{State: api.OpFailed}
	run.Operations["cp-1"] = nil
	run.Report.Verdict = "changed"
	runs, err := f.Preflights("lab")
	require.NoError(t, err)
	last := len(runs) - 1 // lab-1, the oldest, with its report
	runs[last].Run.Report.Verdict = "changed"
	runs[last].Run.ID = "changed"
	rel, ok := f.Release("1.34.4")
	require.True(t, ok)
	rel.Channels, rel.Version = nil, "changed"
	for _, a := range f.Agents() {
		a.Address = "changed"
	}
	audit, _ := f.AuditLog(AuditQuery{Limit: 100})
	audit[0].Action, audit[0].Principal = "changed", "changed"
	in, err := f.PreflightInput("lab", phases.MustParseVersion("1.34.5"))
	require.NoError(t, err)
	in.Cluster.Pools[0].Name = "changed"
	in.Release.Version = "changed"

	after, err := f.Snapshot()
	require.NoError(t, err)
	requireSameBytes(t, before, after, "a change to what a query returned reached the state")
}

// TestQueries checks what each query answers on states cut from the golden
// log.
func TestQueries(t *testing.T) {
	v := phases.MustParseVersion
	preflight1 := firstOf(t, CmdPreflightStart) + 1 // lab-1 running, no result yet
	f := machineAt(t, preflight1)

	t.Run("catalog", func(t *testing.T) {
		var got []string
		for _, r := range f.Releases() {
			got = append(got, r.Version)
		}
		require.Equal(t, []string{"1.33.6", "1.34.4"}, got, "oldest first")
		_, ok := f.Release("1.35.0")
		require.False(t, ok)
		require.Nil(t, New().Releases(), "an empty catalog lists as nil")
	})
	t.Run("clusters", func(t *testing.T) {
		require.Equal(t, []string{"lab"}, f.ClusterNames())
		_, err := f.Cluster("nope")
		require.ErrorIs(t, err, ErrNotFound)
		_, err = f.Upgrade("nope")
		require.ErrorIs(t, err, ErrNotFound)
		_, err = f.Upgrade("lab")
		require.ErrorIs(t, err, ErrNoUpgrade)
		require.Empty(t, f.ActiveUpgrades())
	})
	t.Run("upgrade rules", func(t *testing.T) {
		r, err := f.CheckUpgrade("lab", v("1.34.4"))
		require.NoError(t, err)
		require.Equal(t, "1.33.6", r.StatusVersion.String())
		_, err = f.CheckUpgrade("lab", v("1.34.5"))
		require.ErrorIs(t, err, ErrUnknownVersion)
		_, err = f.CheckUpgrade("nope", v("1.34.4"))
		require.ErrorIs(t, err, ErrNotFound)
	})
	t.Run("agents", func(t *testing.T) {
		a, ok := f.Agent("lab", "cp-1")
		require.True(t, ok)
		require.Equal(t, "cp-1:7443", a.Address)
		_, ok = f.Agent("lab", "nope")
		require.False(t, ok)
		var got []string
		for _, a := range f.Agents() {
			got = append(got, a.Cluster+"/"+a.Node)
		}
		require.Equal(t, []string{"lab/cp-1", "lab/worker-1", "lab/worker-2"}, got)
	})
	t.Run("policy", func(t *testing.T) {
		p, err := f.Policy("lab")
		require.NoError(t, err)
		require.NotNil(t, p.Window)
		_, err = f.Policy("nope")
		require.ErrorIs(t, err, ErrNotFound)
		now := time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)
		require.NoError(t, f.ValidatePolicy("lab", p, now))
		bad := maintenance.Policy{Exclusions: []maintenance.Exclusion{{Start: now, End: now.Add(time.Hour)}}}
		require.ErrorIs(t, f.ValidatePolicy("lab", bad, now), ErrPolicyInvalid, "as setPolicy refuses it")
		require.ErrorIs(t, f.ValidatePolicy("nope", p, now), ErrNotFound)
		_, err = f.PolicyContext("nope", now)
		require.ErrorIs(t, err, ErrNotFound)
		ctx, err := f.PolicyContext("lab", now)
		require.NoError(t, err)
		require.Equal(t, time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC), ctx.EndOfSupport)
		trail, more := f.AuditLog(AuditQuery{Limit: 1})
		require.False(t, more, "one entry of the old trail so far")
		require.Equal(t, "maintenance-policy", trail[0].Action, "the old trail reads as the audit log")
	})
	t.Run("preflight", func(t *testing.T) {
		run, err := f.Preflight("lab", "lab-1")
		require.NoError(t, err)
		require.Equal(t, "running", run.State)
		_, err = f.Preflight("lab", "lab-9")
		require.ErrorIs(t, err, ErrNotFound)
		require.Equal(t, "lab-1", f.PreflightOfOperation("lab", "preflight-lab-1-cp-1-peers"))
		require.Empty(t, f.PreflightOfOperation("lab", "preflight-lab-9-cp-1-peers"))

		progress := f.RunningPreflights()
		require.Len(t, progress, 1)
		p := progress[0]
		require.Equal(t, "lab", p.Cluster)
		require.Equal(t, "lab-1", p.Run)
		require.Equal(t, run.Deadline, p.Deadline)
		require.Equal(t, 6, p.Pending, "three able agents, two operations each")
		require.Len(t, p.Waiting, 3)
		require.Equal(t, run.Operations["cp-1"], p.Waiting["cp-1"], "in the node's order")
		require.ElementsMatch(t, []string{"cp-1", "worker-1", "worker-2"}, p.Reporting)

		in, err := f.PreflightInput("lab", v("1.34.4"))
		require.NoError(t, err)
		require.Equal(t, "1.34.4", in.Release.Version)
		require.Equal(t, "1.33.6", in.Cluster.Version.String())
		require.Len(t, in.Agents, 3)
		require.True(t, in.Agents["cp-1"].Healthy)
	})
	t.Run("preflight done", func(t *testing.T) {
		f := machineAt(t, firstOf(t, CmdPreflightFinish)+1)
		require.Empty(t, f.RunningPreflights())
		runs, err := f.Preflights("lab")
		require.NoError(t, err)
		require.Len(t, runs, 1)
		got := runs[0]
		require.Equal(t, "lab-1", got.Run.ID)
		require.Equal(t, "done", got.Run.State)
		require.Equal(t, 3, got.Hosts, "three nodes were sent host checks")
		require.Nil(t, got.Run.Operations, "operations left out")
		require.Nil(t, got.Run.Results, "results left out")
		require.NotNil(t, got.Run.Report)
		_, err = f.Preflights("nope")
		require.ErrorIs(t, err, ErrNotFound)
	})
	t.Run("preflights newest first", func(t *testing.T) {
		f := machineAt(t, len(goldenEntries()))
		runs, err := f.Preflights("edge")
		require.NoError(t, err)
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.Run.ID)
		}
		require.Equal(t, []string{"edge-2", "edge-1"}, ids)
	})
	t.Run("active upgrades", func(t *testing.T) {
		f := machineAt(t, len(goldenEntries()))
		var got []string
		for _, a := range f.ActiveUpgrades() {
			got = append(got, a.Cluster+" "+a.Upgrade.ID)
			require.Equal(t, a.Upgrade.To.String(), a.Release.Version)
		}
		require.Equal(t, []string{"auto auto-1.34.5-2", "edge edge-1.34.4-2", "lab lab-1.34.5-2"}, got)
	})
}

// TestRunningPreflightsShareNoMemory: the operations RunningPreflights
// offers are copies down to their parameters (a pointer each), so the
// leader may change what it offers without changing the stored run.
// Found by TestPropertyCommandSequences: they were the run's own.
func TestRunningPreflightsShareNoMemory(t *testing.T) {
	entries := goldenEntries()
	at := slices.IndexFunc(entries, func(e goldenEntry) bool { return e.cmd.Type() == CmdPreflightStart }) + 1
	f := machineAt(t, at)
	want, err := f.Preflight("lab", "lab-1")
	require.NoError(t, err)

	runs := f.RunningPreflights()
	require.Len(t, runs, 1)
	changed := 0
	for _, ops := range runs[0].Waiting {
		for _, op := range ops {
			if a := op.CheckArtifacts; a != nil {
				a.Artifacts[0].URL, changed = "http://elsewhere.test/", changed+1
			}
			if p := op.ProbePeers; p != nil {
				p.Addresses[0], changed = "10.9.9.9:1", changed+1
			}
		}
	}
	require.Equal(t, 6, changed, "every host's two operations are waiting")
	got, err := f.Preflight("lab", "lab-1")
	require.NoError(t, err)
	require.Equal(t, want, got, "changing what RunningPreflights returned changed the stored run")
}
