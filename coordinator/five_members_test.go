package coordinator_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
)

// TestFiveMembersSurviveTwoKilled runs a five-member coordinator, the
// largest the README offers: the leader is killed with the control plane
// half way, then a follower of the new term; three of five are a quorum,
// so the upgrade finishes with every operation executed once, and a write
// made after both kills is replicated to every survivor.
func TestFiveMembersSurviveTwoKilled(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 5, ops)
	cl := tc.anyClient(1)
	spec := registerLab(t, cl)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agents := runAgents(ctx, tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)

	eventually(t, "control plane in progress", func() bool {
		got, err := getUpgrade(ctx, tc.anyClient(0), "lab")
		if err != nil {
			return false
		}
		n, ok := got.Node("cp-2")
		return ok && n.State == phases.StateRunning
	})
	first := tc.leader()
	require.NotNil(t, first)
	first.stop(true)
	second := tc.waitLeader()
	require.NotEqual(t, first.id, second.id)
	for _, m := range tc.alive() {
		if m != second {
			m.stop(true)
			break
		}
	}
	require.Len(t, tc.alive(), 3)

	var final api.Cluster
	eventually(t, "upgrade done on three of five members", func() bool {
		final = api.Cluster{}
		_, err := tc.anyClient(0).Do(ctx, http.MethodGet, "/v1/clusters/lab", nil, &final)
		return err == nil && final.Status.Upgrade != nil && final.Status.Upgrade.State == api.UpgradeDone
	})
	require.Equal(t, "1.34.4", final.Status.Version)
	require.Equal(t, map[string]int{"1.34.4": 7}, final.Status.Versions)
	for node, a := range agents {
		for id, n := range a.executions() {
			require.Equal(t, 1, n, "operation %s on %s executed %d times", id, node, n)
		}
	}
	assertSerial(t, ops.Calls(), []string{"cp-1", "cp-2", "cp-3"})

	// A write after both kills commits and reaches every survivor.
	put(t, tc.anyClient(2), "/v1/releases/1.34.5", release("1.34.5"))
	for _, m := range tc.alive() {
		eventually(t, "release replicated to "+m.id, func() bool {
			_, err := m.client().Do(ctx, http.MethodGet, "/v1/releases/1.34.5", nil, nil)
			return err == nil
		})
	}
}
