package maintenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// t0 is a Monday, 00:00 UTC, so weekday arithmetic in tests is easy.
var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

func at(d time.Duration) time.Time { return t0.Add(d) }

func mustCompile(t testing.TB, p Policy) *Compiled {
	t.Helper()
	c, err := p.Compile()
	require.NoError(t, err)
	return c
}

func allChanges() []Change {
	var out []Change
	for _, tg := range []Target{TargetControlPlane, TargetNodes} {
		for _, k := range []ChangeKind{KindMinor, KindPatch, KindDisruption} {
			out = append(out, Change{tg, k})
		}
	}
	return out
}

var (
	cpMinor = Change{TargetControlPlane, KindMinor}
	cpPatch = Change{TargetControlPlane, KindPatch}
	ndPatch = Change{TargetNodes, KindPatch}
)
