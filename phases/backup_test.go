package phases

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBackupStepHoldsTheControlPlane: from StepLayoutBackup an upgrade
// runs a backup step after the control-plane LB pools (here none); the control-plane
// pool depends on it, so a failed snapshot (a non-OK result) keeps the
// pool pending with the reason on the step, retried after
// StepRetryInterval; only a passed step lets the control plane start. A
// cluster that says etcdBackup: skip, and every earlier layout, has no
// such step.
func TestBackupStepHoldsTheControlPlane(t *testing.T) {
	now := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	c := testCluster(0, 3, 0, 2)
	u := NewUpgrade("c1-1.34.4-1", c, MustParseVersion("1.34.4"), Options{StepLayout: StepLayoutBackup}, now)
	b, ok := u.Step(StepIDBackup)
	require.True(t, ok, "layout %d has a backup step", StepLayoutBackup)
	require.Empty(t, b.Deps, "no control-plane LB pool: the backup step comes first")
	cplb, _ := NewUpgrade("x", testCluster(1, 1, 0, 1), MustParseVersion("1.34.4"), Options{StepLayout: StepLayoutBackup}, now).Step(StepIDBackup)
	require.Equal(t, []string{"pool/cplb"}, cplb.Deps)
	cp, _ := u.Step("pool/cp")
	require.Equal(t, []string{StepIDBackup}, cp.Deps)

	// step applies every committing decision and returns the work.
	step := func() []Action {
		var work []Action
		for _, a := range Decide(u, now, Open).Actions {
			if a.Commits() {
				require.NoError(t, u.Apply(a, now), a.ID)
				continue
			}
			work = append(work, a)
		}
		return work
	}
	runBackup := func() Action {
		t.Helper()
		for range 3 { // the first decision may start the step
			for _, a := range step() {
				if a.Kind == ActRunStep && a.Step == StepIDBackup {
					return a
				}
			}
		}
		t.Fatalf("no backup attempt decided")
		return Action{}
	}
	a := runBackup()
	require.Equal(t, u.BackupOperationID(0), a.ID, "the attempt's action ID is the agent operation's")
	up, att, ok := ParseBackupOperationID(a.ID)
	require.True(t, ok)
	require.Equal(t, u.ID, up)
	require.Equal(t, 0, att)

	why := "etcd snapshot on cp-0: no healthy etcd member"
	require.NoError(t, u.ApplyStepResult(StepResult{Upgrade: u.ID, Step: StepIDBackup, Attempt: 0, Message: why}, now))
	for range 3 {
		for _, a := range step() {
			require.NotEqual(t, "pool/cp", a.Step, "the control plane does not start without a backup")
		}
	}
	cp, _ = u.Step("pool/cp")
	require.Equal(t, StatePending, cp.State)
	b, _ = u.Step(StepIDBackup)
	require.Equal(t, StateRunning, b.State)
	require.Equal(t, why, b.Message)
	require.Equal(t, UpgradeRunning, u.State)

	now = now.Add(StepRetryInterval)
	a = runBackup()
	require.Equal(t, u.BackupOperationID(1), a.ID, "the retry is a new operation")
	require.NoError(t, u.ApplyStepResult(StepResult{Upgrade: u.ID, Step: StepIDBackup, Attempt: 1, OK: true, Message: "recorded"}, now))
	step()
	cp, _ = u.Step("pool/cp")
	require.Equal(t, StateRunning, cp.State, "a recorded backup lets the control plane start")

	skip := testCluster(0, 1, 0, 1)
	skip.EtcdBackup = EtcdBackupSkip
	require.NoError(t, skip.Validate())
	_, ok = NewUpgrade("s", skip, MustParseVersion("1.34.4"), Options{StepLayout: StepLayoutBackup}, now).Step(StepIDBackup)
	require.False(t, ok, "etcdBackup: skip lays out no backup step")
	_, ok = NewUpgrade("m", testCluster(0, 1, 0, 1), MustParseVersion("1.34.4"), Options{StepLayout: StepLayoutMolt}, now).Step(StepIDBackup)
	require.False(t, ok, "an upgrade laid out before StepLayoutBackup stays as it was")

	bad := testCluster(0, 1, 0, 1)
	bad.EtcdBackup = "sometimes"
	var ve *ValidationError
	require.ErrorAs(t, bad.Validate(), &ve)
	require.Equal(t, RuleEtcdBackup, ve.Rule)
}
