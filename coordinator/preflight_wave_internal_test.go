package coordinator

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
)

// TestArtifactWave: at most size hosts are offered their artifact check
// at a time — those already checking first, then the smallest names —
// and hosts whose agent cannot answer, or that have no artifact check
// waiting, take no place.
func TestArtifactWave(t *testing.T) {
	check := api.Operation{ID: "a", Kind: api.OpCheckArtifacts}
	probe := api.Operation{ID: "p", Kind: api.OpProbePeers}
	p := statemachine.PreflightProgress{
		Waiting: map[string][]api.Operation{
			"n0": {check, probe}, // its agent is missing
			"n1": {check, probe}, "n2": {check, probe}, "n3": {check},
			"n4": {probe}, // checked its artifacts already
			"n5": {check, probe}, "n6": {check, probe},
		},
		Reporting: []string{"n1", "n2", "n3", "n4", "n5", "n6"},
	}
	wave := func(p statemachine.PreflightProgress, size int) []string {
		return slices.Sorted(maps.Keys(artifactWave(p, size)))
	}
	require.Equal(t, []string{"n1", "n2", "n3"}, wave(p, 3), "the smallest names first")
	require.Equal(t, []string{"n1", "n2", "n3", "n5", "n6"}, wave(p, 10), "a wave larger than what waits")

	p.Started = map[string]bool{"n5": true, "n6": true}
	require.Equal(t, []string{"n1", "n5", "n6"}, wave(p, 3), "hosts checking keep their places")
	require.Equal(t, []string{"n5", "n6"}, wave(p, 2))

	require.Nil(t, artifactWave(p, 0), "no bound")
	require.Nil(t, artifactWave(p, -1), "no bound")
}

// TestPreflightTimeoutPerWave: a run waits PreflightTimeout for each wave
// of artifact checks its hosts need.
func TestPreflightTimeoutPerWave(t *testing.T) {
	ops := map[string][]api.Operation{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		ops[n] = []api.Operation{{Kind: api.OpCheckArtifacts}, {Kind: api.OpProbePeers}}
	}
	ops["h"] = []api.Operation{{Kind: api.OpProbePeers}} // no release artifacts
	require.Equal(t, 4*PreflightTimeout, preflightTimeout(ops, 2))
	require.Equal(t, 3*PreflightTimeout, preflightTimeout(ops, 3))
	require.Equal(t, PreflightTimeout, preflightTimeout(ops, 7))
	require.Equal(t, PreflightTimeout, preflightTimeout(ops, -1))
	require.Equal(t, 2*time.Minute, PreflightTimeout)
}
