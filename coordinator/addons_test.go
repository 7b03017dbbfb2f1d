package coordinator_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/phases"
)

// TestAddonsStepWaitsForTheRollout: the add-ons step applies the target
// release's add-ons from the catalog; an attempt whose rollout does not
// finish within AddonRolloutTimeout fails with the rollout's reason and
// leaves status.appliedManifestsVersion where it was, and the step's next
// attempt, once the rollout finishes, advances it.
func TestAddonsStepWaitsForTheRollout(t *testing.T) {
	ops := newFakeOps()
	ops.holdAddons(true)
	m := startMemberAt(t, "m1", t.TempDir(), true, ops, "", "127.0.0.1:0", nil, func(c *coordinator.Config) {
		c.AddonRolloutTimeout = 300 * time.Millisecond
		c.WorkRetries = 0
	})
	eventually(t, "leader", m.c.IsLeader)
	tc := &testCluster{t: t, ops: ops, members: []*member{m}}
	cl := m.client()
	spec := registerLab(t, cl)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runAgents(ctx, tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)

	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	cluster := func() api.Cluster {
		var c api.Cluster
		_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab", nil, &c)
		require.NoError(t, err)
		return c
	}
	var addons api.Step
	eventually(t, "a failed attempt of the add-ons step", func() bool {
		u := cluster().Status.Upgrade
		if u == nil {
			return false
		}
		for _, s := range u.Steps {
			if s.ID == phases.StepIDAddons {
				addons = s
			}
		}
		return addons.Attempts > 0
	})
	require.NotEqual(t, api.StepDone, addons.State)
	require.Contains(t, addons.Message, "DaemonSet kube-system/kube-proxy: 3 of 7 updated")
	require.Contains(t, addons.Message, "deadline exceeded")
	require.Equal(t, "1.33.6", cluster().Status.AppliedManifestsVersion, "a failed attempt applies no version")
	require.Contains(t, ops.Calls(), "addons 1.34.4 kube-proxy,coredns")

	ops.holdAddons(false) // the rollout finishes; the next attempt passes
	eventually(t, "upgrade done", func() bool {
		u := cluster().Status.Upgrade
		return u != nil && u.State == api.UpgradeDone
	})
	require.Equal(t, "1.34.4", cluster().Status.AppliedManifestsVersion)
}
