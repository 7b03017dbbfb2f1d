//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// testAutomaticPatch is the run's patch upgrade, made automatic (SPEC §14):
// channel regular's target is set while the window is closed (the status
// says why it waits, the dry run when it would finish), the window is
// opened by a policy update and the scheduler starts the upgrade by
// itself; closing the window when the first worker starts pauses the
// upgrade at a safe point (that worker finishes, the next waits), and
// reopening it resumes the upgrade to the end. It returns the upgrade.
func testAutomaticPatch(t *testing.T, ctx context.Context, env *Env, to string) *api.Upgrade {
	probes := env.StartProbes(ctx)
	rep, err := env.RunAutomatic(ctx, AutoOptions{To: to, PauseAt: "worker-1", PauseHold: 5 * time.Second})
	reports := probes.Stop()
	require.NoError(t, err)

	require.Equal(t, api.AutoWaitingForWindow, rep.Waiting.State, rep.Waiting.Message)
	require.Equal(t, to, rep.Waiting.Next)
	require.Equal(t, api.BlockWindow, rep.Waiting.BlockedBy[0].Kind)
	require.NotEmpty(t, rep.Plan.Waits, "the dry run waits for the window")
	require.True(t, rep.Plan.End.After(rep.Plan.Waits[0].End))

	require.True(t, rep.Started.Options.Automatic)
	require.Equal(t, string(api.PauseMaintenanceWindow), rep.Paused.PauseReason)
	w1, _ := rep.Paused.Node("worker-1")
	w2, _ := rep.Paused.Node("worker-2")
	require.Equal(t, api.StepDone, w1.State, "the node in flight finished")
	require.Equal(t, api.StepPending, w2.State, "nothing new started after the window closed")
	require.Equal(t, api.AutoPausedAtWindowEnd, rep.PausedStatus.State, rep.PausedStatus.Message)

	require.Equal(t, api.UpgradeDone, rep.Upgrade.State)
	require.NotZero(t, rep.Upgrade.ResumedAt, "resumed when the window reopened")
	require.Equal(t, api.AutoUpToDate, rep.Done.State)
	require.Contains(t, rep.Done.LastAttempt.Reason, "channel regular targets "+to)
	t.Logf("MEASURED automatic patch to %s: started %s after the window opened, done %s after (paused %s)\n%s",
		to, rep.StartedAfter.Round(time.Second), rep.Took.Round(time.Second), rep.Upgrade.ResumedAt.Sub(rep.Paused.PausedAt).Round(time.Second), Summary(rep.Upgrade))
	requireProbed(t, to, probes, reports)
	requireOrder(t, rep.Upgrade)
	requireClusterAt(t, ctx, env, rep.Upgrade, to)
	return rep.Upgrade
}
