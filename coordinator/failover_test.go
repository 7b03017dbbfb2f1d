package coordinator_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/preflight"
	"github.com/moltproject/molt/raftstore"
)

// TestLeaderKilledMidUpgrade runs a scripted upgrade on three members with
// simulated agents, kills the leader halfway, and checks that the new
// leader finishes it with every operation executed exactly once and the
// order of SPEC §4 intact.
func TestLeaderKilledMidUpgrade(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 3, ops)
	cl := tc.anyClient(1) // a follower most likely: writes are forwarded
	spec := registerLab(t, cl)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agents := runAgents(ctx, tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)

	var u api.Upgrade
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, &u)
	require.NoError(t, err)
	require.Equal(t, "lab-1.34.4-1", u.ID)

	// Wait until the control-plane pool is half way, then crash the leader.
	eventually(t, "control plane in progress", func() bool {
		var got api.Upgrade
		if _, err := tc.anyClient(0).Do(ctx, http.MethodGet, "/v1/clusters/lab/upgrade", nil, &got); err != nil {
			return false
		}
		for _, n := range got.Nodes {
			if n.Node == "cp-2" && n.State == api.StepRunning {
				return true
			}
		}
		return false
	})
	old := tc.leader()
	require.NotNil(t, old)
	killed := time.Now()
	old.stop(true)
	newLeader := tc.waitLeader()
	require.NotEqual(t, old.id, newLeader.id)
	t.Logf("new leader %s elected %v after the kill", newLeader.id, time.Since(killed))

	var final api.Cluster
	eventually(t, "upgrade done", func() bool {
		final = api.Cluster{}
		_, err := tc.anyClient(0).Do(ctx, http.MethodGet, "/v1/clusters/lab", nil, &final)
		return err == nil && final.Status.Upgrade != nil && final.Status.Upgrade.State == api.UpgradeDone
	})
	require.Equal(t, "1.34.4", final.Status.Version)
	require.Equal(t, "1.34.4", final.Spec.Version)
	require.Equal(t, map[string]int{"1.34.4": 7}, final.Status.Versions)
	require.Equal(t, map[string]int{"1.34.4": 3}, final.Status.ControlPlaneNodepoolStatus.Versions)
	require.Equal(t, "1.34.4", final.Status.AppliedManifestsVersion)
	require.Contains(t, ops.Calls(), "addons 1.34.4 kube-proxy,coredns", "the add-ons step applies the target release's add-ons")

	// Every operation took effect exactly once, on the right node.
	total := 0
	for node, a := range agents {
		for id, n := range a.executions() {
			require.Equal(t, 1, n, "operation %s executed %d times", id, n)
			require.Contains(t, id, "/"+node+"/")
			total++
		}
	}
	// Each node: containerd + kubelet binaries; non-workers: static pods.
	require.Equal(t, 7*2+5, total)

	// The order of SPEC §4, from the recorded step timestamps.
	steps := map[string]api.Step{}
	for _, s := range final.Status.Upgrade.Steps {
		steps[s.ID] = s
		require.Equal(t, api.StepDone, s.State, s.ID)
	}
	before := func(a, b string) {
		require.False(t, steps[b].StartedAt.Before(steps[a].FinishedAt), "%s must finish before %s starts", a, b)
	}
	before("pool/cplb", "pool/cp")
	before("pool/cp", "addons")
	before("pool/cp", "pool/lb")
	before("pool/lb", "pool/workers")
	_, hasLifecycle := steps["lifecycle"]
	require.False(t, hasLifecycle, "new upgrades have no lifecycle step (phases.StepLayoutNoLifecycle)")
	for _, s := range []string{"addons", "pool/workers"} {
		before(s, "health")
	}
	// Control-plane nodes one at a time: their cordon..uncordon spans never overlap.
	assertSerial(t, ops.Calls(), []string{"cp-1", "cp-2", "cp-3"})
}

// assertSerial checks from the call log that the named nodes were upgraded
// one after another (uncordon of one before cordon of the next).
func assertSerial(t *testing.T, calls []string, nodes []string) {
	t.Helper()
	busy := ""
	for _, c := range calls {
		f := strings.Fields(c)
		if len(f) < 2 {
			continue
		}
		for _, n := range nodes {
			if f[1] != n {
				continue
			}
			switch f[0] {
			case "cordon":
				if busy != "" && busy != n {
					t.Fatalf("%s cordoned while %s was still upgrading", n, busy)
				}
				busy = n
			case "uncordon":
				busy = ""
			}
		}
	}
}

// TestPollReturnsWhenLeadershipMoves hands leadership to another member
// while an agent's long poll waits at the leader, which stays up: the poll
// returns at once with "not leader" instead of holding the agent for its
// whole wait, and a poll at the new leader (or forwarded there by the old
// one) gets the offers.
func TestPollReturnsWhenLeadershipMoves(t *testing.T) {
	tc := newTestCluster(t, 3, newFakeOps())
	old := tc.waitLeader()
	cl := old.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	put(t, cl, "/v1/clusters/lab", clusterSpec("lab", "1.33.6"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	ag, err := enrollAgent(ctx, cl, old.addr, "lab", "cp-1")
	require.NoError(t, err)
	_, err = ag.client(old.addr).Register(ctx, api.RegisterRequest{Cluster: "lab", Node: "cp-1", Address: "cp-1:7443"})
	require.NoError(t, err)
	eventually(t, "the leader serving polls", func() bool {
		_, err := old.c.PollOperations(ctx, "lab", "cp-1", 0)
		return err == nil
	})

	// The poll would wait an hour for an offer; no timed assertion: only
	// the result (not-leader, not an empty answer) and the test deadline.
	type answer struct {
		ops []api.Operation
		err error
	}
	polled := make(chan answer, 1)
	go func() {
		ops, err := old.c.PollOperations(ctx, "lab", "cp-1", time.Hour)
		polled <- answer{ops, err}
	}()
	eventually(t, "leadership transferred", func() bool {
		err := old.c.Store().TransferLeadership(ctx)
		return err == nil || !old.c.IsLeader()
	})
	select {
	case a := <-polled:
		require.ErrorIs(t, a.err, raftstore.ErrNotLeader)
		require.Empty(t, a.ops)
	case <-ctx.Done():
		t.Fatal("the poll at the deposed leader did not return")
	}
	require.False(t, old.dead.Load(), "the old leader is still up")
	newLeader := tc.waitLeader()
	require.NotEqual(t, old.id, newLeader.id)
	eventually(t, "the old leader knowing the new one", func() bool { return old.c.LeaderHTTPAddr() == newLeader.addr })

	// At the new leader the same agent gets offers: a preflight run's host
	// checks, started through the old leader (forwarded).
	var run struct{ ID string }
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/preflight", api.PreflightRequest{Version: "1.34.4"}, &run)
	require.NoError(t, err)
	var ops []api.Operation
	eventually(t, "offers at the new leader", func() bool {
		ops, err = newLeader.c.PollOperations(ctx, "lab", "cp-1", time.Second)
		return err == nil && len(ops) > 0
	})
	for _, op := range ops {
		require.True(t, strings.HasPrefix(op.ID, "preflight-"+run.ID+"-"), op.ID)
	}
	// An agent that still talks to the old leader is forwarded to the new.
	viaOld, err := ag.client(old.addr).PollOperations(ctx, "lab", "cp-1", time.Second)
	require.NoError(t, err)
	require.Equal(t, ops, viaOld)
}

// TestCloseEndsTheLeadersWork closes the leader while its work is in
// flight (a cordon that only returns when cancelled), without cancelling
// Run's context first: when Close returns, Run has returned and the
// cordon has been cancelled and has returned.
func TestCloseEndsTheLeadersWork(t *testing.T) {
	ops := newFakeOps()
	m := startMember(t, "m1", t.TempDir(), true, ops, "")
	tc := &testCluster{t: t, members: []*member{m}, ops: ops}
	tc.waitLeader()
	cl := m.client()
	spec := registerLab(t, cl)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startAgents(ctx, tc, "lab", nodeNames(spec), true)
	waitAgents(t, tc, "lab", 7)
	_ = ops.holdCordon("cplb-1") // never released: only cancellation ends it
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	eventually(t, "the cordon of cplb-1 in flight", func() bool { return ops.called("cordon cplb-1") })

	require.NoError(t, m.c.Close())
	select {
	case <-m.done:
	default:
		t.Fatal("Run still running after Close returned")
	}
	require.True(t, ops.called("cordon cancelled cplb-1"), "the cordon returned before Close did")
}

// TestLeaderKilledDuringPreflight: the leader dies while the upgrade waits
// for its preflight run; the new leader finishes the replicated run, and
// the report's entry starts the upgrade, which completes.
func TestLeaderKilledDuringPreflight(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 3, ops)
	cl := tc.anyClient(1)
	spec := registerLab(t, cl)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runAgents(ctx, tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)

	old := tc.leader()
	require.NotNil(t, old)
	var u api.Upgrade
	_, err := old.client().Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, &u)
	require.NoError(t, err)
	require.Equal(t, api.UpgradePreflight, u.State)
	old.stop(true)
	require.NotEqual(t, old.id, tc.waitLeader().id)

	eventually(t, "upgrade done under the new leader", func() bool {
		u = api.Upgrade{}
		_, err := tc.anyClient(0).Do(ctx, http.MethodGet, "/v1/clusters/lab/upgrade", nil, &u)
		return err == nil && u.State == api.UpgradeDone
	})
	var run api.PreflightRun
	_, err = tc.anyClient(0).Do(ctx, http.MethodGet, "/v1/clusters/lab/preflight/"+u.Preflight, nil, &run)
	require.NoError(t, err)
	require.NotEqual(t, string(preflight.Failed), run.Report.Verdict, "the upgrade ran on the passing run it names")
}
