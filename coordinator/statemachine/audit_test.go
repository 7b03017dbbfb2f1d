package statemachine

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/raftstore/command"
)

// keepAudit is the retention the tests' audit commands carry.
var keepAudit = AuditRetention{MaxEntries: 10000}

// wrapAudit is cmd carried with rec, as the leader proposes a request's
// command.
func wrapAudit(rec AuditRecord, cmd Command) AuditedCmd {
	c, err := NewAudited(rec, keepAudit, cmd)
	if err != nil {
		panic(err)
	}
	return c
}

// applyAt applies one command at index through the machine's registry.
func applyAt(t *testing.T, f *Machine, index uint64, cmd Command) error {
	t.Helper()
	b, err := raftstore.Encode(cmd)
	require.NoError(t, err)
	_, err = f.Handlers()[cmd.Type()](index, b[1:])
	return err
}

func seqs(rs []AuditRecord) []uint64 {
	out := make([]uint64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

// TestAuditRetentionPerClass: each class keeps at most MaxEntries, oldest
// dropped first, so agents' records never push operators' out; a
// retention the command carries applies to both classes at once.
func TestAuditRetentionPerClass(t *testing.T) {
	f := New()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ret := AuditRetention{MaxEntries: 3}
	index := uint64(0)
	add := func(kind string) {
		index++
		require.NoError(t, applyAt(t, f, index, AppendAuditCmd{Retention: ret,
			Record: AuditRecord{Time: t0.Add(time.Duration(index) * time.Second), Principal: fmt.Sprintf("%s-%d", kind, index), Kind: kind}}))
	}
	for range 2 {
		add("operator")
	}
	for range 50 {
		add("agent")
	}
	require.Equal(t, []uint64{2, 1}, seqs(mustAudit(t, f, AuditQuery{Limit: 10, Principal: ""}, "operator")), "50 agents' records pushed no operator's out")
	require.Equal(t, []uint64{52, 51, 50}, seqs(mustAudit(t, f, AuditQuery{Limit: 10}, "agent")))
	for range 3 {
		add("operator")
	}
	require.Equal(t, []uint64{55, 54, 53}, seqs(mustAudit(t, f, AuditQuery{Limit: 10}, "operator")))
	require.Equal(t, uint64(55), f.st.AuditSeq, "numbers are never reused")

	// A smaller bound, carried by the next record, trims both classes.
	ret = AuditRetention{MaxEntries: 1}
	add("operator")
	require.Len(t, f.st.AuditLog, 1)
	require.Len(t, f.st.AgentAuditLog, 1)
	// Zero means the default; a bound past the maximum is the maximum.
	require.Equal(t, DefaultAuditMaxEntries, AuditRetention{}.maxEntries())
	require.Equal(t, MaxAuditMaxEntries, AuditRetention{MaxEntries: 1 << 40}.maxEntries())
}

// mustAudit reads the whole log and keeps the records of one kind.
func mustAudit(t *testing.T, f *Machine, q AuditQuery, kind string) []AuditRecord {
	t.Helper()
	all, more := f.AuditLog(q)
	require.False(t, more)
	var out []AuditRecord
	for _, r := range all {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// TestAuditRetentionByAge: records older than MaxAge, measured from the
// newest record's time (the leader's clock in the command), are dropped
// when a record is appended; a replica replaying the same entries keeps
// the same records whatever its own clock says.
func TestAuditRetentionByAge(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ret := AuditRetention{MaxEntries: 100, MaxAge: 24 * time.Hour}
	run := func() *Machine {
		f := New()
		for i, at := range []time.Time{t0, t0.Add(time.Hour), t0.Add(20 * time.Hour), t0.Add(25 * time.Hour), t0.Add(26 * time.Hour)} {
			require.NoError(t, applyAt(t, f, uint64(i+1), AppendAuditCmd{Retention: ret, Record: AuditRecord{Time: at, Principal: "p", Kind: "operator"}}))
		}
		return f
	}
	f := run()
	got, _ := f.AuditLog(AuditQuery{Limit: 10})
	require.Equal(t, []uint64{5, 4, 3}, seqs(got), "t0 and t0+1h are more than 24h older than t0+26h")
	a, err := f.Snapshot()
	require.NoError(t, err)
	b, err := run().Snapshot()
	require.NoError(t, err)
	require.Equal(t, a, b)
}

// TestAuditQuery: newest first across both classes, filters, and paging
// by Seq.
func TestAuditQuery(t *testing.T) {
	f := New()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	recs := []AuditRecord{
		{Principal: "token:op0001 (ci)", Kind: "operator", Cluster: "lab"},
		{Principal: "agent:lab/cp-1", Kind: "agent", Cluster: "lab", Node: "cp-1"},
		{Principal: "token:ad0001", Kind: "operator"},
		{Principal: "token:op0001 (ci)", Kind: "operator", Cluster: "edge"},
		{Principal: "bootstrap-token:bt0001", Kind: "bootstrap", Cluster: "lab", Node: "w-1"},
		{Principal: "token:op00012", Kind: "operator", Cluster: "lab"},
	}
	for i, r := range recs {
		r.Time = t0.Add(time.Duration(i) * time.Minute)
		require.NoError(t, applyAt(t, f, uint64(10+i), AppendAuditCmd{Retention: keepAudit, Record: r}))
	}
	for _, tc := range []struct {
		name string
		q    AuditQuery
		want []uint64
		more bool
	}{
		{"all, newest first", AuditQuery{Limit: 10}, []uint64{6, 5, 4, 3, 2, 1}, false},
		{"a page", AuditQuery{Limit: 2}, []uint64{6, 5}, true},
		{"the next page", AuditQuery{Limit: 2, Before: 5}, []uint64{4, 3}, true},
		{"the last page", AuditQuery{Limit: 2, Before: 3}, []uint64{2, 1}, false},
		{"a cluster", AuditQuery{Limit: 10, Cluster: "lab"}, []uint64{6, 5, 2, 1}, false},
		{"a principal by its ID", AuditQuery{Limit: 10, Principal: "token:op0001"}, []uint64{4, 1}, false},
		{"a principal whole", AuditQuery{Limit: 10, Principal: "token:op0001 (ci)"}, []uint64{4, 1}, false},
		{"since, inclusive", AuditQuery{Limit: 10, Since: t0.Add(4 * time.Minute)}, []uint64{6, 5}, false},
		{"until, exclusive", AuditQuery{Limit: 10, Until: t0.Add(2 * time.Minute)}, []uint64{2, 1}, false},
		{"a window and a cluster", AuditQuery{Limit: 1, Cluster: "lab", Since: t0.Add(time.Minute), Until: t0.Add(5 * time.Minute)}, []uint64{5}, true},
		{"no limit is one", AuditQuery{}, []uint64{6}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, more := f.AuditLog(tc.q)
			require.Equal(t, tc.want, seqs(got))
			require.Equal(t, tc.more, more)
		})
	}
	got, _ := f.AuditLog(AuditQuery{Limit: 1})
	require.Equal(t, uint64(15), got[0].Index)
}

// TestAuditTrailBeforeTheLog: a state of a release before the audit log
// (an old trail only) reads as the log, numbered as its first record will
// number it; a command applied bare after that record writes its trail
// entry into the log, with its index.
func TestAuditTrailBeforeTheLog(t *testing.T) {
	entries := goldenEntries()
	at := firstOf(t, CmdAppendAudit)
	f := machineAt(t, at)
	before, more := f.AuditLog(AuditQuery{Limit: 100})
	require.False(t, more)
	require.Equal(t, []uint64{5, 4, 3, 2, 1}, seqs(before))
	require.Equal(t, "pool-complete", before[0].Action)

	f = machineAt(t, len(entries))
	after, _ := f.AuditLog(AuditQuery{Limit: 100})
	for i := range before {
		require.Equal(t, before[i], after[len(after)-5+i], "the moved trail kept its numbers")
	}
	// The ledger's entries end with a bare policy command.
	policyAt := 0
	for i, e := range entries {
		if c, ok := e.cmd.(SetPolicyCmd); ok && c.Cluster == "ledger" {
			policyAt = i + 1
		}
	}
	require.NotZero(t, policyAt)
	ledger, _ := f.AuditLog(AuditQuery{Limit: 100, Cluster: "ledger"})
	newest := ledger[0]
	require.Equal(t, "maintenance-policy", newest.Action, "the ledger's last entry is a bare policy command")
	require.Equal(t, uint64(policyAt), newest.Index)
	require.Empty(t, newest.Principal, "a bare command knows no principal")
	for _, r := range after {
		require.NotEqual(t, "emergency-override", r.Action, "the audited override's record replaced its trail entry")
		if r.Reason != "" {
			require.Equal(t, "token:op0001 (ci)", r.Principal)
			require.Equal(t, "CVE-2026-1234 in kubelet", r.Reason)
		}
	}
}

// TestAuditedRefusesNestingAndUnknownTypes: the command inside an
// AuditedCmd is one this release applies, and not an audit command: any
// other is a log this replica cannot follow. A domain number this release
// does not know is a newer release's command: it cannot be read
// (command.ErrCannotRead, the replica halts), and does not panic.
func TestAuditedRefusesNestingAndUnknownTypes(t *testing.T) {
	rec := AuditRecord{Principal: "p", Kind: "operator"}
	for _, c := range []AuditedCmd{
		wrapAudit(rec, AppendAuditCmd{Record: rec}),
		wrapAudit(rec, wrapAudit(rec, PutReleaseCmd{Release: api.Release{Version: "1.34.4"}})),
		{Record: rec, CommandType: 5, Command: json.RawMessage(`{}`)},
		{Record: rec, CommandType: CmdPutRelease, Command: json.RawMessage(`{"release":"not one"}`)},
	} {
		require.Panics(t, func() { _ = applyAt(t, New(), 1, c) }, "inner type %s", c.CommandType)
	}
	var err error
	require.NotPanics(t, func() {
		err = applyAt(t, New(), 1, AuditedCmd{Record: rec, CommandType: 99, Command: json.RawMessage(`{}`)})
	})
	require.ErrorIs(t, err, command.ErrCannotRead)
}

func TestAuditable(t *testing.T) {
	require.True(t, Auditable(CmdPutRelease))
	require.True(t, Auditable(CmdPoolWorkResult))
	require.False(t, Auditable(CmdAudited), "no nesting")
	require.False(t, Auditable(CmdAppendAudit))
	require.False(t, Auditable(5), "raftstore's own")
	require.False(t, Auditable(99), "unknown")
}

// BenchmarkAppendAuditAtCap appends records to a log held at its cap
// (10,000 per class), each append dropping the oldest: the apply's cost
// per record, which must not grow with the cap.
func BenchmarkAppendAuditAtCap(b *testing.B) {
	f := New()
	apply := f.Handlers()[CmdAppendAudit]
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	rec := AuditRecord{Principal: "token:op0001 (ci)", Kind: "operator", Role: "operator", Method: "PUT", Route: "/v1/releases/{version}",
		Path: "/v1/releases/1.34.4", Status: 403, Problem: "https://molt.dev/problems/forbidden", Rule: "role-admin"}
	body := func(i int) []byte {
		rec.Time = t0.Add(time.Duration(i) * time.Second)
		b, _ := json.Marshal(AppendAuditCmd{Record: rec, Retention: AuditRetention{MaxEntries: DefaultAuditMaxEntries}})
		return b
	}
	for i := range DefaultAuditMaxEntries {
		_, _ = apply(uint64(i+1), body(i))
	}
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = body(DefaultAuditMaxEntries + i)
	}
	b.ResetTimer()
	for i := range b.N {
		_, _ = apply(uint64(DefaultAuditMaxEntries+i+1), bodies[i])
	}
	b.StopTimer()
	if len(f.st.AuditLog) != DefaultAuditMaxEntries {
		b.Fatalf("log holds %d records", len(f.st.AuditLog))
	}
}
