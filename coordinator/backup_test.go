package coordinator_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/phases"
)

// An upgrade does not start its control plane until an etcd snapshot is
// recorded: the snapshot operation fails on the host (no healthy etcd
// member) and the upgrade holds before the control-plane pool with the
// reason in its status, no control-plane host touched; the next attempt,
// after the step's retry interval on the leader's clock, succeeds: the
// snapshot's bytes are on the coordinator's disk with the recorded
// sha256, the backup is listed first, and the control plane proceeds.
func TestUpgradeHoldsControlPlaneUntilBackupRecorded(t *testing.T) {
	const why = "etcdbackup: no healthy etcd member: https://10.0.0.11:2379: status: context deadline exceeded"
	var broken atomic.Bool
	broken.Store(true)
	ops := newFakeOps()
	clk := clock.NewManual(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	m := startMemberAt(t, "m1", t.TempDir(), true, ops, "", "127.0.0.1:0", clk)
	tc := &testCluster{t: t, members: []*member{m}, ops: ops}
	tc.waitLeader()
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	spec := clusterSpec("lab", "1.33.6")
	put(t, cl, "/v1/clusters/lab", spec)
	agents := map[string]*simAgent{}
	for i, n := range nodeNames(spec) {
		a := newSimAgent("lab", n)
		a.fail = func(_ string, op api.Operation) string {
			if op.EtcdSnapshot != nil && broken.Load() {
				return why
			}
			return ""
		}
		agents[n] = a
		go a.run(t.Context(), tc, i)
	}
	waitAgents(t, tc, "lab", 7)

	_, err := cl.Do(t.Context(), http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	backupStep := func() phases.Step {
		u, err := m.c.Upgrade("lab")
		require.NoError(t, err)
		s, ok := u.Step(phases.StepIDBackup)
		require.True(t, ok, "the upgrade has a backup step")
		return *s
	}
	eventually(t, "the snapshot attempt failed", func() bool { return backupStep().Attempts >= 1 })
	s := backupStep()
	require.Equal(t, phases.StateRunning, s.State, "held, not done")
	require.Equal(t, "etcd snapshot on cp-1: "+why, s.Message, "the first healthy control-plane host in spec order took it")

	// The reason is in what an operator reads.
	var status map[string]any
	_, err = cl.Do(t.Context(), http.MethodGet, "/v1/clusters/lab/upgrade", nil, &status)
	require.NoError(t, err)
	raw, _ := jsonString(status)
	require.Contains(t, raw, "no healthy etcd member")

	u, err := m.c.Upgrade("lab")
	require.NoError(t, err)
	require.Equal(t, phases.UpgradeRunning, u.State)
	cp, _ := u.Step("pool/cp")
	require.Equal(t, phases.StatePending, cp.State, "the control plane does not start without a backup")
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		require.Empty(t, agents[n].executions(), "nothing changed on %s", n)
	}
	list, err := cl.Backups(t.Context(), "lab")
	require.NoError(t, err)
	require.Empty(t, list.Backups)

	// The host's etcd answers again; the step's next attempt takes it.
	broken.Store(false)
	clk.Advance(phases.StepRetryInterval)
	eventually(t, "backup step done", func() bool { return backupStep().State == phases.StateDone })
	list, err = cl.Backups(t.Context(), "lab")
	require.NoError(t, err)
	require.Len(t, list.Backups, 1)
	b := list.Backups[0]
	require.Equal(t, "cp-1", b.Node)
	require.Equal(t, "m1", b.Holder)
	require.Equal(t, u.ID, b.Upgrade)
	require.True(t, strings.HasPrefix(b.ID, u.ID+"/run/backup/a"), b.ID)
	require.NotEqual(t, u.BackupOperationID(0), b.ID, "the failed attempt recorded nothing")
	f, err := os.Open(b.File)
	require.NoError(t, err, "the snapshot is on the holder's disk")
	h := sha256.New()
	n, err := io.Copy(h, f)
	f.Close()
	require.NoError(t, err)
	require.Equal(t, b.Size, n)
	require.Equal(t, b.SHA256, hex.EncodeToString(h.Sum(nil)))
	require.Contains(t, backupStep().Message, "held by coordinator member m1")

	// Uploads are checked as they are written: bytes that do not hash to
	// the described sum are refused with the rule and nothing is kept;
	// an operation already recorded answers its record and stores nothing.
	cred, err := enrollAgent(t.Context(), cl, m.addr, "lab", "cp-2")
	require.NoError(t, err)
	agent := cred.client(m.addr)
	bad := api.Backup{Member: "https://cp-2:2379", Revision: 9, Size: 5, SHA256: strings.Repeat("0", 64), TakenAt: clk.Now()}
	five := func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("bytes")), nil }
	_, err = agent.UploadBackup(t.Context(), "lab", "cp-2", u.BackupOperationID(7), bad, five)
	var p *api.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	require.Equal(t, "backup-sha256", p.Rule)
	again, err := agent.UploadBackup(t.Context(), "lab", "cp-2", b.ID, bad, five)
	require.NoError(t, err)
	require.Equal(t, b, again, "a repeated operation answers its record")
	entries, err := os.ReadDir(filepath.Dir(b.File))
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing kept of the refused or repeated uploads")

	eventually(t, "the control plane proceeds and the upgrade ends", func() bool {
		u, err := m.c.Upgrade("lab")
		return err == nil && u.State == phases.UpgradeDone
	})
	list, err = cl.Backups(t.Context(), "lab")
	require.NoError(t, err)
	require.Len(t, list.Backups, 1, "one backup per upgrade")
}

// A cluster whose control-plane agents run molt-agent 0.1.0, which does
// not know the snapshot operation, is told so: the backup step holds the
// control plane with what to do, and no operation is sent to them.
func TestBackupStepNamesAgentsTooOldToTakeIt(t *testing.T) {
	ops := newFakeOps()
	clk := clock.NewManual(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	m := startMemberAt(t, "m1", t.TempDir(), true, ops, "", "127.0.0.1:0", clk)
	tc := &testCluster{t: t, members: []*member{m}, ops: ops}
	tc.waitLeader()
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	spec := clusterSpec("lab", "1.33.6")
	put(t, cl, "/v1/clusters/lab", spec)
	agents := map[string]*simAgent{}
	for i, n := range nodeNames(spec) {
		a := newSimAgent("lab", n)
		a.agentVersion = "0.1.0"
		agents[n] = a
		go a.run(t.Context(), tc, i)
	}
	waitAgents(t, tc, "lab", 7)
	_, err := cl.Do(t.Context(), http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	eventually(t, "the snapshot attempt failed", func() bool {
		u, err := m.c.Upgrade("lab")
		if err != nil {
			return false
		}
		s, _ := u.Step(phases.StepIDBackup)
		return s != nil && s.Attempts >= 1
	})
	u, err := m.c.Upgrade("lab")
	require.NoError(t, err)
	s, _ := u.Step(phases.StepIDBackup)
	require.Contains(t, s.Message, "run a molt-agent before 0.2.0")
	require.Contains(t, s.Message, "etcdBackup to skip")
	cp, _ := u.Step("pool/cp")
	require.Equal(t, phases.StatePending, cp.State)
	for _, n := range []string{"cp-1", "cp-2", "cp-3"} {
		agents[n].mu.Lock()
		for id := range agents[n].upgradeOf {
			require.NotContains(t, id, "/run/backup/", "no snapshot offered to %s", n)
		}
		agents[n].mu.Unlock()
	}
}

// A cluster says etcdBackup: skip explicitly (no etcd credentials on its
// control-plane hosts): its upgrades have no backup step. Any other
// value is refused with the rule, and the cluster is not registered.
func TestEtcdBackupSkipIsExplicit(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps())
	m := tc.waitLeader()
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	bad := clusterSpec("ext", "1.33.6")
	bad.EtcdBackup = "sometimes"
	_, err := cl.Do(t.Context(), http.MethodPut, "/v1/clusters/ext", bad, nil)
	var p *api.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, phases.RuleEtcdBackup, p.Rule)
	_, err = m.c.Cluster("ext")
	require.Error(t, err, "nothing registered")

	spec := clusterSpec("ext", "1.33.6")
	spec.EtcdBackup = "skip"
	put(t, cl, "/v1/clusters/ext", spec)
	var got api.Cluster
	_, err = cl.Do(t.Context(), http.MethodGet, "/v1/clusters/ext", nil, &got)
	require.NoError(t, err)
	require.Equal(t, "skip", got.Spec.EtcdBackup)
	_, err = cl.Do(t.Context(), http.MethodPost, "/v1/clusters/ext/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	u, err := m.c.Upgrade("ext")
	require.NoError(t, err)
	require.Equal(t, phases.CurrentStepLayout, u.Options.StepLayout)
	_, ok := u.Step(phases.StepIDBackup)
	require.False(t, ok, "no backup step for a cluster that skips it")
}
