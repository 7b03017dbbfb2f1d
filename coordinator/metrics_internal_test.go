package coordinator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// TestStepMetricsNameEveryState: a cancelled pool step and a rolled-back
// one export their own state, not "unknown" (metrics.StepStates holds
// both; "rolledBack" takes the metrics' snake case).
func TestStepMetricsNameEveryState(t *testing.T) {
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	v1, v2 := phases.MustParseVersion("1.33.6"), phases.MustParseVersion("1.34.4")
	r := &statemachine.ClusterRecord{
		Spec:          phases.ClusterSpec{Name: "c", Version: v2},
		StatusVersion: v1,
		Upgrade: &phases.Upgrade{ID: "c-1", Cluster: "c", From: v1, To: v2, State: phases.UpgradeCancelled, CreatedAt: now,
			Steps: []phases.Step{
				{ID: "pool/a", Kind: phases.StepPool, Pool: "a", State: phases.StateCancelled, StartedAt: now},
				{ID: "pool/b", Kind: phases.StepPool, Pool: "b", State: phases.StateRolledBack, StartedAt: now},
				{ID: "health", Kind: phases.StepHealth, State: phases.StatePending},
			}},
	}
	v := clusterMetrics(r, nil, maintenance.ValidationContext{}, now)
	got := map[string]string{}
	for _, s := range v.Steps {
		got[s.Name] = s.State
	}
	require.Equal(t, map[string]string{"pool/a": "cancelled", "pool/b": "rolled_back", "health": "pending"}, got)
}
