package coordinator_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
)

// TestProtectionsCommittedWithThePoolStart: an automatic upgrade reads the
// pool's protected pods (SPEC §8) before it starts the pool and commits
// both in one entry, so every state in which the worker pool runs already
// knows worker-1 is protected; worker-1 then goes last and not before its
// pods become evictable. A manual upgrade does not read protections.
func TestProtectionsCommittedWithThePoolStart(t *testing.T) {
	ops := newFakeOps()
	// Protected for 8 s from when the pool start reads it (every node has
	// a gates step): a fixed wall-clock deadline passed before the pool
	// started on a loaded machine, and then nothing made worker-1 go last.
	ops.protectFor = map[string]time.Duration{"worker-1": 8 * time.Second}
	var until time.Time
	tc := newTestCluster(t, 1, ops)
	cl := tc.anyClient(0)
	spec := registerLab(t, cl)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runAgents(ctx, tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)

	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4", Automatic: true}, nil)
	require.NoError(t, err)
	var u *phases.Upgrade
	seenRunning := false
	eventually(t, "automatic upgrade done", func() bool {
		got, err := getUpgrade(ctx, cl, "lab")
		if err != nil {
			return false
		}
		u = got
		if s, ok := u.Step("pool/workers"); ok && s.State != phases.StatePending {
			seenRunning = true
			var read bool
			until, read = ops.protectedUntil("worker-1")
			require.True(t, read, "the pool runs (%s) before worker-1's protection was read", s.State)
			n, _ := u.Node("worker-1")
			require.Equal(t, until, n.ProtectedUntil.UTC(), "the pool runs (%s) without worker-1's protection", s.State)
		}
		return u.State == phases.UpgradeDone
	})
	require.True(t, seenRunning)
	w1, _ := u.Node("worker-1")
	w2, _ := u.Node("worker-2")
	require.False(t, w1.StartedAt.Before(until), "worker-1 started %s, before its pods were evictable at %s", w1.StartedAt, until)
	require.False(t, w1.StartedAt.Before(w2.StartedAt), "the protected node goes last")
	require.Contains(t, ops.Calls(), "protected worker-1")

	// A manual upgrade gives no protection and reads none.
	before := len(ops.Calls())
	put(t, cl, "/v1/releases/1.34.5", release("1.34.5"))
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.5"}, nil)
	require.NoError(t, err)
	eventually(t, "manual upgrade done", func() bool {
		u, err := getUpgrade(ctx, cl, "lab")
		return err == nil && u.ID == "lab-1.34.5-2" && u.State == phases.UpgradeDone
	})
	for _, c := range ops.Calls()[before:] {
		require.NotContains(t, c, "protected ", "a manual upgrade read protections")
	}
}
