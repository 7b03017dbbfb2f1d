package phases

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPoolCommandLegalityDuringRollback completes TestPoolCommandLegality
// for the phases a blue/green rollback goes through: while it runs
// (ROLLBACK_STARTED, not pausable) and once it finished (ROLLED_BACK, the
// upgrade cancelled): each command allowed or refused naming its rule.
func TestPoolCommandLegalityDuringRollback(t *testing.T) {
	want := map[BlueGreenPhase]map[string]string{
		PhaseRollbackStarted: {PoolCancel: "cancel-during-rollback", PoolResume: "not-cancelled", PoolRollback: "already-rolling-back", PoolComplete: "complete-outside-soak"},
		PhaseRolledBack:      {PoolCancel: "upgrade-cancelled", PoolResume: "not-cancelled", PoolRollback: "already-rolling-back", PoolComplete: "upgrade-cancelled"},
	}
	for phase, cmds := range want {
		for cmd, rule := range cmds {
			t.Run(fmt.Sprintf("%s/%s", phase, cmd), func(t *testing.T) {
				s := newSim(t, migCluster(StrategyBlueGreen, 1, 2, nil), v1344, mig)
				for {
					p, _ := s.u.Pool("mig")
					if p.BlueGreen.Phase == PhaseDrainingBlue {
						break
					}
					require.True(t, s.step(), "never reached %s", PhaseDrainingBlue)
				}
				require.NoError(t, s.u.PoolCommand("mig", PoolRollback, s.now))
				for {
					p, _ := s.u.Pool("mig")
					if p.BlueGreen.Phase == phase && (phase != PhaseRolledBack || s.u.State == UpgradeCancelled) {
						break
					}
					require.True(t, s.step(), "never reached %s", phase)
				}
				checkCommand(t, s.u, cmd, rule)
			})
		}
	}
}
