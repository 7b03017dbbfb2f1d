package coordinator_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
)

// autoLab registers releases 1.33.6, 1.33.7 and 1.34.4 and cluster lab at
// 1.33.6 on channel regular (whose target is not set yet), with an "any
// time" maintenance policy given at registration (without one it would
// be held for the registration hold), with its agents running, and
// returns the spec.
func autoLab(t *testing.T, ctx context.Context, tc *testCluster) api.ClusterSpec {
	t.Helper()
	cl := tc.anyClient(0)
	for _, v := range []string{"1.33.6", "1.33.7", "1.34.4"} {
		put(t, cl, "/v1/releases/"+v, release(v))
	}
	spec := clusterSpec("lab", "1.33.6")
	spec.Channel = "regular"
	spec.MaintenancePolicy = &api.MaintenancePolicy{}
	put(t, cl, "/v1/clusters/lab", spec)
	runAgents(ctx, tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)
	return spec
}

// dailyWindow is a policy whose daily 6-hour window starts at from's time
// of day (UTC, whole seconds).
func dailyWindow(from time.Time) api.MaintenancePolicy {
	s := from.UTC().Truncate(time.Second)
	return api.MaintenancePolicy{Window: &api.MaintenanceWindow{Start: s, End: s.Add(6 * time.Hour), Recurrence: "FREQ=DAILY"}}
}

func problemRule(err error) string {
	var p *api.Problem
	if errors.As(err, &p) {
		return p.Rule
	}
	return ""
}

func problemStatus(err error) int {
	var p *api.Problem
	if errors.As(err, &p) {
		return p.Status
	}
	return 0
}

func upgradeStatus(t *testing.T, ctx context.Context, cl *client.Client, cluster string) api.UpgradeStatus {
	t.Helper()
	var st api.UpgradeStatus
	_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/"+cluster+"/upgrade-status", nil, &st)
	require.NoError(t, err)
	return st
}

// TestAutomaticUpgradeFollowsItsWindow: nothing starts while the window
// is closed (the status says why and when); opening it by a policy update
// starts an automatic upgrade by itself; closing it mid-way pauses it at a
// safe point; reopening resumes it to the end. Channels refuse unknown
// names and versions.
func TestAutomaticUpgradeFollowsItsWindow(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 1, ops)
	cl := tc.anyClient(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	autoLab(t, ctx, tc)

	st := upgradeStatus(t, ctx, cl, "lab")
	require.Equal(t, api.AutoUpToDate, st.State)
	require.True(t, strings.HasPrefix(st.Message, "channel regular has no auto-upgrade target; 1.33 reaches its end of support on "), st.Message)
	require.True(t, st.ForcedByEndOfSupport, "what its end of support will do")
	require.Equal(t, "1.34.4", st.Next)
	require.Equal(t, st.EndOfSupport, st.NextOpportunity)

	// Refusals name their rule and change nothing.
	_, err := cl.Do(ctx, http.MethodPut, "/v1/channels/beta", api.ChannelUpdate{AutoUpgradeTarget: "1.33.7"}, nil)
	require.Equal(t, statemachine.RuleUnknownChannel, problemRule(err), "%v", err)
	_, err = cl.Do(ctx, http.MethodPut, "/v1/channels/regular", api.ChannelUpdate{AutoUpgradeTarget: "1.35.0"}, nil)
	require.Equal(t, statemachine.RuleChannelVersionUnknown, problemRule(err), "%v", err)
	_, err = cl.Do(ctx, http.MethodPut, "/v1/channels/regular", api.ChannelUpdate{AutoUpgradeTarget: "one"}, nil)
	require.Equal(t, phases.RuleInvalid, problemRule(err), "%v", err)
	_, err = cl.Do(ctx, http.MethodGet, "/v1/channels/beta", nil, nil)
	require.Equal(t, http.StatusNotFound, problemStatus(err), "%v", err)

	// The window opens two hours from now: the scheduler waits.
	now := time.Now().UTC()
	put(t, cl, "/v1/clusters/lab/maintenance-policy", dailyWindow(now.Add(2*time.Hour)))
	var ch api.Channel
	_, err = cl.Do(ctx, http.MethodPut, "/v1/channels/regular", api.ChannelUpdate{AutoUpgradeTarget: "1.33.7"}, &ch)
	require.NoError(t, err)
	require.Equal(t, api.Channel{Name: "regular", DefaultVersion: "1.34.4", AutoUpgradeTarget: "1.33.7", UpdatedAt: ch.UpdatedAt}, ch,
		"the default is the newest release listing regular")
	var chs []api.Channel
	_, err = cl.Do(ctx, http.MethodGet, "/v1/channels", nil, &chs)
	require.NoError(t, err)
	require.Len(t, chs, 3)

	st = upgradeStatus(t, ctx, cl, "lab")
	require.Equal(t, api.AutoWaitingForWindow, st.State, st.Message)
	require.Equal(t, "1.33.7", st.Target)
	require.Equal(t, "1.33.7", st.Next)
	require.Len(t, st.BlockedBy, 1)
	require.Equal(t, api.BlockWindow, st.BlockedBy[0].Kind)
	require.WithinDuration(t, now.Add(2*time.Hour), st.BlockedBy[0].Until, time.Second)
	require.WithinDuration(t, now.Add(2*time.Hour), st.NextOpportunity, time.Second)
	_, err = getUpgrade(ctx, cl, "lab")
	require.Error(t, err, "nothing started")

	// The dry run of the automatic upgrade waits for the window, and says
	// when it is expected to finish.
	var plan api.Plan
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.33.7", Automatic: true, DryRun: true}, &plan)
	require.NoError(t, err)
	require.NotEmpty(t, plan.Waits)
	require.Equal(t, "pool/cplb", plan.Waits[0].Step)
	require.WithinDuration(t, now.Add(2*time.Hour), plan.Waits[0].End, time.Second)
	require.True(t, plan.End.After(now.Add(2*time.Hour)))
	var manualPlan api.Plan
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.33.7", DryRun: true}, &manualPlan)
	require.NoError(t, err)
	require.Empty(t, manualPlan.Waits, "a manual upgrade starts when asked")

	// Open it (a window that began an hour ago): the scheduler starts the
	// patch by itself. The first worker's cordon is held, to close the
	// window mid-way.
	hold := ops.holdCordon("worker-1")
	put(t, cl, "/v1/clusters/lab/maintenance-policy", dailyWindow(now.Add(-time.Hour)))
	var u *phases.Upgrade
	eventually(t, "an automatic upgrade", func() bool {
		u, err = getUpgrade(ctx, cl, "lab")
		return err == nil
	})
	require.True(t, u.Options.Automatic)
	require.Equal(t, "lab-1.33.7-1", u.ID)
	st = upgradeStatus(t, ctx, cl, "lab")
	require.Equal(t, api.AutoRunning, st.State)
	require.NotNil(t, st.LastAttempt)
	require.Equal(t, "automatic patch upgrade 1.33.6 → 1.33.7: channel regular targets 1.33.7", st.LastAttempt.Reason)
	eventually(t, "worker-1's cordon", func() bool { return ops.called("cordon worker-1") })

	// Close it: worker-1 finishes, nothing new starts.
	put(t, cl, "/v1/clusters/lab/maintenance-policy", dailyWindow(now.Add(2*time.Hour)))
	hold()
	eventually(t, "paused at the window's end", func() bool {
		u, err = getUpgrade(ctx, cl, "lab")
		return err == nil && u.PauseReason == string(maintenance.PauseMaintenanceWindow)
	})
	eventually(t, "worker-1 done", func() bool {
		u, err = getUpgrade(ctx, cl, "lab")
		n, _ := u.Node("worker-1")
		return err == nil && n.State == phases.StateDone
	})
	st = upgradeStatus(t, ctx, cl, "lab")
	require.Equal(t, api.AutoPausedAtWindowEnd, st.State, st.Message)
	require.WithinDuration(t, now.Add(2*time.Hour), st.NextOpportunity, time.Second)
	n, _ := u.Node("worker-2")
	require.Equal(t, phases.StatePending, n.State, "nothing new starts outside the window")

	// Reopen it: the upgrade resumes to the end; the outcome is recorded.
	put(t, cl, "/v1/clusters/lab/maintenance-policy", dailyWindow(now.Add(-time.Hour)))
	eventually(t, "done and recorded", func() bool {
		st = upgradeStatus(t, ctx, cl, "lab")
		return st.State == api.AutoUpToDate && st.LastAttempt != nil && st.LastAttempt.Outcome == "done"
	})
	var c api.Cluster
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab", nil, &c)
	require.NoError(t, err)
	require.Equal(t, "1.33.7", c.Status.Version)
	require.Len(t, c.Status.History, 1)
}

// TestSchedulerDecisionSurvivesLeaderKill: the leader commits the start of
// an automatic upgrade and is killed at once; the new leader continues
// that upgrade to its end and starts no second one, and the old leader's
// decision proposed again is refused as stale.
func TestSchedulerDecisionSurvivesLeaderKill(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 3, ops)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	autoLab(t, ctx, tc)

	type start struct {
		by  *member
		cmd statemachine.AutoStartCmd
	}
	decided := make(chan start, 8)
	for _, m := range tc.list() {
		m.c.OnAutoStart(func(c statemachine.AutoStartCmd) { decided <- start{m, c} })
	}
	put(t, tc.anyClient(1), "/v1/channels/regular", api.ChannelUpdate{AutoUpgradeTarget: "1.33.7"})
	var first start
	select {
	case first = <-decided:
	case <-time.After(waitTimeout):
		t.Fatal("no automatic start")
	}
	// The member that committed the start is the one killed, whoever
	// leads by now: on a loaded machine leadership may have moved since
	// (or be in an election, with no leader at all). Before, every member
	// holds the record of what each member reads, so that the next leader
	// takes the dead one at its record (0.2.0) and judges the decision on
	// the state, not at the capability gate.
	eventually(t, "every member's capabilities recorded everywhere", func() bool {
		for _, m := range tc.alive() {
			if len(m.c.MemberRecords()) != 3 {
				return false
			}
		}
		return true
	})
	old := first.by
	old.stop(true)
	newLeader := tc.waitLeader()
	require.Equal(t, "1.33.7", first.cmd.To.String())

	err := proposeAnswered(t, ctx, tc, first.cmd)
	require.ErrorIs(t, err, phases.ErrStale, "the old leader's decision again")

	cl := newLeader.client()
	eventually(t, "the upgrade done and recorded", func() bool {
		var st api.UpgradeStatus
		_, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/lab/upgrade-status", nil, &st)
		return err == nil && st.LastAttempt != nil && st.LastAttempt.Outcome == "done"
	})
	var c api.Cluster
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab", nil, &c)
	require.NoError(t, err)
	require.Equal(t, "1.33.7", c.Status.Version)
	require.Len(t, c.Status.History, 1, "one upgrade")
	require.Equal(t, "lab-1.33.7-1", c.Status.History[0].ID)
	select {
	case again := <-decided:
		t.Fatalf("a second start was committed by %s: %+v", again.by.id, again.cmd)
	default:
	}
}

// proposeAnswered proposes a command on the current leader until the
// state machine answers it, and returns that answer. A leader elected on
// a bare quorum (one member of three killed) steps down as soon as the
// other live member misses a lease, which a loaded machine makes happen
// within a second: the proposal then comes back ErrNotLeader (nothing
// appended), ErrLeadershipLost or ErrTimeout (appended, maybe committed) —
// no answer of the state machine's, so it is proposed again on the next
// leader. A proposal applied although its answer was lost would show in
// the state the caller checks afterwards (here: a second upgrade).
func proposeAnswered(t *testing.T, ctx context.Context, tc *testCluster, cmd statemachine.Command) error {
	t.Helper()
	var err error
	eventually(t, "the state machine's answer to a proposal", func() bool {
		l := tc.leader()
		if l == nil {
			return false
		}
		_, err = l.c.Propose(ctx, cmd)
		if errors.Is(err, raftstore.ErrNotLeader) || errors.Is(err, raftstore.ErrLeadershipLost) || errors.Is(err, raftstore.ErrTimeout) {
			t.Logf("no answer from the state machine through %s (%v); proposing again", l.id, err)
			return false
		}
		return true
	})
	return err
}
