package coordinator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/phases"
)

// unavailableOps answers as fakeOps does, except that the drains of one
// node fail as a call does when the API server cannot be reached (the
// control-plane LB's host just restarted it): the next `failures` of them,
// or all of them when failures is negative.
type unavailableOps struct {
	*fakeOps
	node     string
	mu       sync.Mutex
	failures int
	failed   int
}

func (u *unavailableOps) Connect(string, []byte) (coordinator.ClusterOps, error) { return u, nil }

func (u *unavailableOps) Drain(ctx context.Context, node string, opts coordinator.DrainOptions) (coordinator.Drained, error) {
	u.mu.Lock()
	if node == u.node && u.failures != 0 {
		u.failures--
		u.failed++
		u.mu.Unlock()
		return coordinator.Drained{}, fmt.Errorf("%w: kube: api call failed: list pods on %s: dial tcp 10.77.0.10:6443: connect: connection refused",
			coordinator.ErrAPIUnavailable, node)
	}
	u.mu.Unlock()
	return u.fakeOps.Drain(ctx, node, opts)
}

func (u *unavailableOps) failedDrains() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.failed
}

// TestUnavailableAPIIsWaitedFor: the first control-plane node's drain
// finds the API server unreachable more times than WorkRetries allows a
// failing call; the coordinator repeats it while the API is away for less
// than APIUnavailableTimeout, and the upgrade goes on. An API that stays
// away longer fails the node, saying so.
func TestUnavailableAPIIsWaitedFor(t *testing.T) {
	run := func(t *testing.T, failures, retries int, timeout time.Duration) (*phases.Upgrade, *unavailableOps) {
		ops := &unavailableOps{fakeOps: newFakeOps(), node: "cp-1", failures: failures}
		tc := newTestCluster(t, 1, nil, func(c *coordinator.Config) {
			c.Connector = ops
			c.WorkRetries = retries
			c.APIUnavailableTimeout = timeout
		})
		cl := upgradeLab(t, tc)
		u := waitLabUpgrade(t, cl, "upgrade ended", func(u *phases.Upgrade) bool { return !u.InProgress() })
		return u, ops
	}

	t.Run("away for a while: waited for", func(t *testing.T) {
		// Twice WorkRetries+1: counted as failures, the node would fail.
		u, ops := run(t, 8, 3, time.Minute)
		require.Equal(t, phases.UpgradeDone, u.State, u.Reason)
		require.Equal(t, 8, ops.failedDrains())
		n, ok := u.Node("cp-1")
		require.True(t, ok)
		require.Equal(t, phases.StateDone, n.State)
	})
	t.Run("away past the timeout: the node fails", func(t *testing.T) {
		// No retries for failures: a second attempt is the wait's. (The
		// first attempt starts the 200 ms; a second always follows it.)
		u, ops := run(t, -1, 0, 200*time.Millisecond)
		require.Equal(t, phases.UpgradeFailed, u.State)
		require.Greater(t, ops.failedDrains(), 1, "repeated past WorkRetries while unavailable")
		n, ok := u.Node("cp-1")
		require.True(t, ok)
		require.Equal(t, phases.StateFailed, n.State)
		require.Contains(t, n.Error, "(the API unavailable timeout)")
		require.Contains(t, n.Error, "API server unavailable")
	})
}
