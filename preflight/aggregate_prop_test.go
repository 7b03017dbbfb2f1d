package preflight_test

import (
	"cmp"
	"slices"
	"testing"

	"github.com/moltproject/molt/preflight"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestAggregateProperties: whatever the results, the verdict is failed
// exactly when some failure of a non-warning check is present, Failed
// names exactly those checks in order, and the order is by ID.
func TestAggregateProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		results := rapid.SliceOf(rapid.Custom(func(t *rapid.T) preflight.Result {
			return preflight.Result{
				Check:    rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(t, "id"),
				Severity: rapid.SampledFrom([]preflight.Severity{preflight.Blocking, preflight.Warning, ""}).Draw(t, "sev"),
				Status:   rapid.SampledFrom([]preflight.Status{preflight.Pass, preflight.Warn, preflight.Fail, "odd"}).Draw(t, "status"),
				Blocks:   rapid.Bool().Draw(t, "blocks"),
			}
		})).Draw(t, "results")
		rep := preflight.Aggregate(results)

		var wantFailed []string
		anyNonPass := false
		for _, r := range results {
			if r.Status != preflight.Pass && r.Status != preflight.Warn && r.Severity != preflight.Warning {
				wantFailed = append(wantFailed, r.Check)
			}
			anyNonPass = anyNonPass || r.Status != preflight.Pass
		}
		slices.Sort(wantFailed)
		require.Equal(t, wantFailed, rep.Failed)
		switch {
		case len(wantFailed) > 0:
			require.Equal(t, preflight.Failed, rep.Verdict)
		case anyNonPass:
			require.Equal(t, preflight.PassedWithWarnings, rep.Verdict)
		default:
			require.Equal(t, preflight.Passed, rep.Verdict)
		}
		require.True(t, slices.IsSortedFunc(rep.Results, func(a, b preflight.Result) int {
			return cmp.Compare(a.Check, b.Check)
		}))
		require.Len(t, rep.Results, len(results))
	})
}
