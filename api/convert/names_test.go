package convert_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// TestWireNamesEqualTheEngines pins the names package api gives clients
// to read progress with (api/progress.go) to the engine's: a client that
// compares a wire field with one of them must mean what the engine meant.
func TestWireNamesEqualTheEngines(t *testing.T) {
	for _, pair := range [][2]string{
		{string(api.StepKindPool), string(phases.StepPool)},
		{string(api.StepKindAddons), string(phases.StepAddons)},
		{string(api.StepKindLifecycle), string(phases.StepLifecycle)},
		{string(api.StepKindHealth), string(phases.StepHealth)},
		{string(api.StepKindBackup), string(phases.StepBackup)},
		{api.StepIDAddons, phases.StepIDAddons},
		{api.StepIDLifecycle, phases.StepIDLifecycle},
		{api.StepIDHealth, phases.StepIDHealth},
		{api.StepIDBackup, phases.StepIDBackup},
		{api.PoolStepID("w"), phases.PoolStepID("w")},

		{string(api.NodeStepCordon), string(phases.NodeCordon)},
		{string(api.NodeStepDrain), string(phases.NodeDrain)},
		{string(api.NodeStepOperation), string(phases.NodeOperation)},
		{string(api.NodeStepWaitReady), string(phases.NodeWaitReady)},
		{string(api.NodeStepUncordon), string(phases.NodeUncordon)},
		{string(api.NodeStepCreateReplacement), string(phases.NodeCreateReplacement)},
		{string(api.NodeStepDeleteInstance), string(phases.NodeDeleteInstance)},
		{string(api.NodeStepRecreateInstance), string(phases.NodeRecreateInstance)},
		{string(api.NodeStepWaitReplacement), string(phases.NodeWaitReplacement)},
		{string(api.NodeStepUndoReplacement), string(phases.NodeUndoReplacement)},
		{string(api.NodeStepGates), string(phases.NodeGates)},

		{api.StrategySurge, phases.StrategySurge},
		{api.StrategyBlueGreen, phases.StrategyBlueGreen},

		{api.BlueGreenCreatingGreen, string(phases.PhaseCreatingGreen)},
		{api.BlueGreenCordoningBlue, string(phases.PhaseCordoningBlue)},
		{api.BlueGreenDrainingBlue, string(phases.PhaseDrainingBlue)},
		{api.BlueGreenSoaking, string(phases.PhaseSoaking)},
		{api.BlueGreenDeletingBlue, string(phases.PhaseDeletingBlue)},
		{api.BlueGreenRollbackStarted, string(phases.PhaseRollbackStarted)},
		{api.BlueGreenCompleted, string(phases.PhaseCompleted)},
		{api.BlueGreenRolledBack, string(phases.PhaseRolledBack)},

		{api.PoolCancel, phases.PoolCancel},
		{api.PoolResume, phases.PoolResume},
		{api.PoolRollback, phases.PoolRollback},
		{api.PoolComplete, phases.PoolComplete},

		{api.CloudGCE, phases.CloudGCE},
		{api.CloudLab, phases.CloudLab},

		{api.PauseMaintenanceWindow, string(maintenance.PauseMaintenanceWindow)},

		{string(api.StepPending), string(phases.StatePending)},
		{string(api.StepRunning), string(phases.StateRunning)},
		{string(api.StepDone), string(phases.StateDone)},
		{string(api.StepFailed), string(phases.StateFailed)},
		{string(api.StepCancelled), string(phases.StateCancelled)},
		{string(api.StepRolledBack), string(phases.StateRolledBack)},

		{string(api.UpgradePreflight), string(phases.UpgradePreflight)},
		{string(api.UpgradeRefused), string(phases.UpgradeRefused)},
		{string(api.UpgradeRunning), string(phases.UpgradeRunning)},
		{string(api.UpgradeDone), string(phases.UpgradeDone)},
		{string(api.UpgradeFailed), string(phases.UpgradeFailed)},
		{string(api.UpgradeCancelled), string(phases.UpgradeCancelled)},
	} {
		require.Equal(t, pair[1], pair[0], "a wire name differs from the engine's")
	}
}

// TestNodeStepStringIsTheWiresStep: api.NodeStep's String is how the
// coordinator names a node's step on the wire (NodeTask.Step, the
// engine's NodeStep.String), for every step of every strategy.
func TestNodeStepStringIsTheWiresStep(t *testing.T) {
	var steps []phases.NodeStep
	for _, r := range []phases.Role{phases.RoleControlPlaneLB, phases.RoleControlPlane, phases.RoleLoadBalancer, phases.RoleWorker} {
		steps = append(steps, phases.BareMetalNodeSteps(r)...)
	}
	steps = append(steps, phases.NodeStep{Kind: phases.NodeCreateReplacement}, phases.NodeStep{Kind: phases.NodeOperation, Op: &phases.OpSpec{Kind: phases.OpRollback}})
	u := &phases.Upgrade{Pools: []phases.PoolTrack{{NodeSteps: steps}}}
	wire := convert.UpgradeToAPI(u)
	require.Len(t, wire.Pools[0].NodeSteps, len(steps))
	for i, s := range steps {
		require.Equal(t, s.String(), wire.Pools[0].NodeSteps[i].String())
	}
}

// TestBackupOperationIDKnownOnTheWire: a client tells the backup step's
// etcd snapshot operation from a node's as the engine does.
func TestBackupOperationIDKnownOnTheWire(t *testing.T) {
	u := &phases.Upgrade{ID: "u-1"}
	for _, id := range []string{u.BackupOperationID(0), u.BackupOperationID(3), "u-1/cp-1/7/a0", "u-1/run/health/a0",
		"u-1/run/backup/a", "u-1/run/backup/a01", "u-1/run/backup/a-1", "u-1/run/backup/x1", "u-1/run/backup"} {
		_, _, engine := phases.ParseBackupOperationID(id)
		require.Equal(t, engine, api.IsBackupOperationID(id), id)
	}
	require.True(t, api.IsBackupOperationID(u.BackupOperationID(3)))
}
