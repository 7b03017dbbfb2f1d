package preflight_test

import (
	"testing"

	"github.com/moltproject/molt/preflight"
	"github.com/stretchr/testify/require"
)

func res(id string, sev preflight.Severity, st preflight.Status) preflight.Result {
	return preflight.Result{Check: id, Severity: sev, Status: st}
}

func TestAggregate(t *testing.T) {
	B, W := preflight.Blocking, preflight.Warning
	for _, tc := range []struct {
		name    string
		in      []preflight.Result
		verdict preflight.Verdict
		failed  []string
		order   []string
	}{
		{"nothing run", nil, preflight.Passed, nil, []string{}},
		{"all pass", []preflight.Result{res("b", B, preflight.Pass), res("a", W, preflight.Pass)},
			preflight.Passed, nil, []string{"a", "b"}},
		{"a warning", []preflight.Result{res("b", B, preflight.Pass), res("a", W, preflight.Warn)},
			preflight.PassedWithWarnings, nil, []string{"a", "b"}},
		{"a warning check fails (data missing)", []preflight.Result{res("a", W, preflight.Fail), res("b", B, preflight.Pass)},
			preflight.PassedWithWarnings, nil, []string{"a", "b"}},
		{"a blocking check fails", []preflight.Result{res("z", B, preflight.Fail), res("a", W, preflight.Warn), res("m", B, preflight.Fail)},
			preflight.Failed, []string{"m", "z"}, []string{"a", "m", "z"}},
		{"unknown status blocks", []preflight.Result{res("a", B, "maybe")}, preflight.Failed, []string{"a"}, []string{"a"}},
		{"unknown severity blocks", []preflight.Result{res("a", "", preflight.Fail)}, preflight.Failed, []string{"a"}, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := preflight.Aggregate(tc.in)
			require.Equal(t, tc.verdict, rep.Verdict)
			require.Equal(t, tc.failed, rep.Failed)
			require.Equal(t, tc.verdict == preflight.Failed, rep.Blocked())
			got := []string{}
			for _, r := range rep.Results {
				got = append(got, r.Check)
				require.Equal(t, r.Status != preflight.Pass && r.Status != preflight.Warn && r.Severity != preflight.Warning, r.Blocks)
			}
			require.Equal(t, tc.order, got)
		})
	}
}

func TestAggregateRecomputesBlocksAndKeepsInput(t *testing.T) {
	in := []preflight.Result{
		{Check: "b", Severity: preflight.Blocking, Status: preflight.Fail, Blocks: false},
		{Check: "a", Severity: preflight.Warning, Status: preflight.Fail, Blocks: true},
	}
	rep := preflight.Aggregate(in)
	require.Equal(t, []string{"b"}, rep.Failed)
	r, ok := rep.Result("a")
	require.True(t, ok)
	require.False(t, r.Blocks)
	require.Equal(t, "b", in[0].Check, "input order untouched")
	require.False(t, in[0].Blocks, "input not modified")
}

func TestAggregateIsDeterministic(t *testing.T) {
	a := preflight.Run(with(func(in *preflight.Input) { in.Release = nil; delete(in.Nodes, "w-1") }))
	b := preflight.Run(with(func(in *preflight.Input) { in.Release = nil; delete(in.Nodes, "w-1") }))
	require.Equal(t, a, b)
	require.Equal(t, preflight.Failed, a.Verdict)
	require.Equal(t, []string{preflight.IDArtifacts, preflight.IDNodesReady, preflight.IDReleaseInCatalog}, a.Failed)
}
