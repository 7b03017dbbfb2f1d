//go:build e2e

package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// smokeSeed is the chaos schedule of the faulted patch in CI: a partition
// of a follower during the add-ons, the control-plane LB's proxy frozen
// at worker-2's cordon, the leader frozen at worker-2's gates, and
// cplb-1's link to the coordinator cut for 42 s while it imports images
// (SmokeProfile; `molt-chaos --profile smoke --seed N` draws the same).
// MOLT_CHAOS_SEED=N runs another.
const smokeSeed = 10

// chaosSmoke is the chaos the faulted patch of TestUpgradeEndToEnd runs
// under, beside the leader and agent it kills itself and the MIG pool's
// rollback.
type chaosSmoke struct {
	ch *Chaos
	t0 time.Time
}

func startChaosSmoke(t *testing.T, ctx context.Context, env *Env) *chaosSmoke {
	t.Helper()
	seed := uint64(smokeSeed)
	if s := os.Getenv("MOLT_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "MOLT_CHAOS_SEED")
		seed = n
	}
	t.Logf("chaos smoke: seed %d (MOLT_CHAOS_SEED=%d repeats its schedule)", seed, seed)
	ch, err := env.StartChaos(ctx, ChaosConfig{Seed: seed, Profile: SmokeProfile(), Out: tlog{t}})
	require.NoError(t, err)
	t.Cleanup(ch.Close)
	return &chaosSmoke{ch: ch, t0: time.Now()}
}

// finish heals what is still in place, checks the invariants (docs/chaos.md)
// and fails the test on any violation or an ending other than want
// (EndHalted: the upgrade cancelled, by the operator's rollback).
func (s *chaosSmoke) finish(t *testing.T, ctx context.Context, want Ending) {
	t.Helper()
	t1 := time.Now()
	rep := s.ch.Finish(ctx, false)
	t.Logf("MEASURED chaos smoke (checks %s):\n%s", time.Since(t1).Round(time.Second), rep.Table())
	require.Empty(t, rep.Violations())
	require.Equal(t, want, rep.Ending, rep.EndDetail)
	if want == EndHalted {
		require.True(t, strings.HasPrefix(rep.EndDetail, string(api.UpgradeCancelled)+":"), "halted by the cancellation, not %q", rep.EndDetail)
	}
	fired := 0
	for _, f := range rep.Faults {
		if f.Fired {
			fired++
			require.Empty(t, f.Err, "fault %s", f.Kind)
		}
	}
	require.Positive(t, fired, "no fault of the schedule fired")
}
