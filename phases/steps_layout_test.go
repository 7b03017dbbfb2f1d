package phases

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An upgrade keeps the step layout it was made with: one an older release
// recorded (no StepLayout) still has its lifecycle step; new ones do not,
// and neither do their plans.
func TestStepLayouts(t *testing.T) {
	c := testCluster(1, 3, 1, 2)
	to := MustParseVersion("1.34.4")
	now := time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC)
	ids := func(steps []Step) []string {
		var out []string
		for _, s := range steps {
			out = append(out, s.ID)
		}
		return out
	}
	old := NewUpgrade("u-1", c, to, Options{}, now)
	require.Contains(t, ids(old.Steps), StepIDLifecycle)
	_, ok := old.Step(StepIDLifecycle)
	require.True(t, ok)

	cur := NewUpgrade("u-2", c, to, Options{StepLayout: CurrentStepLayout}, now)
	require.NotContains(t, ids(cur.Steps), StepIDLifecycle)
	require.Contains(t, ids(cur.Steps), StepIDBackup, "the current layout takes an etcd backup before the control plane")
	require.Equal(t, len(old.Steps), len(cur.Steps), "no lifecycle step, a backup step")
	health, ok := cur.Step(StepIDHealth)
	require.True(t, ok)
	require.NotContains(t, health.Deps, StepIDLifecycle)

	plan := MakePlan(c, to, Options{StepLayout: CurrentStepLayout}, DefaultDurations(), now)
	for _, s := range plan.Steps {
		require.NotEqual(t, StepIDLifecycle, s.ID)
	}
}
