package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

func TestUpgradeBinarySucceedsAndKeepsPrevious(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	old := sha(t, h.kubelet())
	newBin := kubeletScript("v1.34.0", false)
	url, sum := h.serve("kubelet", newBin)
	stop, _ := runAgent(t, h.cfg)

	coord.enqueue(upgradeOp("op-1", url, sum, "v1.34.0"))
	res := coord.waitResult(t, "op-1")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, "v1.34.0", res.Details["runningVersion"])
	require.Equal(t, sum, sha(t, h.kubelet()))
	require.Equal(t, old, sha(t, h.kubelet()+prevSuffix))
	require.Equal(t, 1, h.restartCount("kubelet.service"))
	fi, err := os.Stat(h.kubelet())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())

	// The same ID delivered again has no second effect; the recorded
	// result is reported again.
	coord.enqueue(upgradeOp("op-1", url, sum, "v1.34.0"))
	require.Eventually(t, func() bool { return len(coord.resultsFor("op-1")) == 2 }, 10e9, 1e7)
	require.Equal(t, 1, h.restartCount("kubelet.service"))
	require.Equal(t, old, sha(t, h.kubelet()+prevSuffix), "backup must still be the old binary")

	// A new ID for the version already installed changes nothing and
	// restarts nothing.
	coord.enqueue(upgradeOp("op-2", url, sum, "v1.34.0"))
	res = coord.waitResult(t, "op-2")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, "binary already at the requested sha256", res.Details["note"])
	require.Equal(t, 1, h.restartCount("kubelet.service"))
	require.Equal(t, old, sha(t, h.kubelet()+prevSuffix))
	require.NoError(t, stop())
	noTempFiles(t, filepath.Dir(h.kubelet()))
}

// noTempFiles checks that no partial download or temp copy was left behind.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Name(), ".molt-new")
		require.NotContains(t, e.Name(), ".molt-tmp")
	}
}

func TestBadInputLeavesHostUnchanged(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	old := sha(t, h.kubelet())
	goodURL, goodSum := h.serve("kubelet", kubeletScript("v1.34.0", false))
	brokenURL, brokenSum := h.serve("kubelet-broken", kubeletScript("v1.34.0", true))
	_, _ = runAgent(t, h.cfg)

	tests := []struct {
		name    string
		op      api.Operation
		wantMsg string
		// changed is true when the binary was replaced and then restored.
		restored bool
	}{
		{name: "wrong checksum", op: upgradeOp("bad-sum", goodURL, brokenSum, "v1.34.0"), wantMsg: "checksum mismatch"},
		{name: "unreachable url", op: upgradeOp("bad-url", "http://127.0.0.1:1/kubelet", goodSum, "v1.34.0"), wantMsg: "download failed"},
		{name: "not found", op: upgradeOp("bad-404", h.files.URL+"/nope", goodSum, "v1.34.0"), wantMsg: "404"},
		{name: "unknown kind", op: api.Operation{ID: "bad-kind", Kind: "RunShell", ProbePeers: &api.ProbePeers{}}, wantMsg: "unknown kind"},
		{name: "body missing", op: api.Operation{ID: "bad-body", Kind: api.OpUpgradeBinary}, wantMsg: "want exactly one body"},
		{name: "wrong body", op: api.Operation{ID: "bad-mix", Kind: api.OpUpgradeBinary, ProbePeers: &api.ProbePeers{}}, wantMsg: "incomplete"},
		{name: "manifest escapes dir", op: api.Operation{ID: "bad-manifest", Kind: api.OpUpgradeStaticPods,
			UpgradeStaticPods: &api.UpgradeStaticPods{Manifests: map[string]string{"../x.yaml": manifest("x", "i")}}}, wantMsg: "manifest name"},
		{name: "unhealthy after upgrade", op: upgradeOp("bad-health", brokenURL, brokenSum, "v1.34.0"), wantMsg: "previous binary restored", restored: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			restarts := h.restartCount("kubelet.service")
			coord.enqueue(tt.op)
			res := coord.waitResult(t, tt.op.ID)
			require.Equal(t, api.OpFailed, res.State)
			require.Contains(t, res.Message, tt.wantMsg)
			require.Equal(t, old, sha(t, h.kubelet()), "binary must be the old one")
			noTempFiles(t, filepath.Dir(h.kubelet()))
			if tt.restored {
				require.Equal(t, restarts+2, h.restartCount("kubelet.service"), "restart new, restart restored")
			} else {
				require.Equal(t, restarts, h.restartCount("kubelet.service"))
				require.NoFileExists(t, h.kubelet()+prevSuffix)
			}
			entries, err := os.ReadDir(filepath.Join(h.root, "etc/kubernetes/manifests"))
			require.NoError(t, err)
			require.Empty(t, entries)
		})
	}
}

func TestRollbackRestoresPreviousBinary(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	old := sha(t, h.kubelet())
	url, sum := h.serve("kubelet", kubeletScript("v1.34.0", false))
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(upgradeOp("up", url, sum, "v1.34.0"))
	require.Equal(t, api.OpSucceeded, coord.waitResult(t, "up").State)
	coord.enqueue(api.Operation{ID: "rb", Kind: api.OpRollback, Rollback: &api.Rollback{OperationID: "up"}})
	res := coord.waitResult(t, "rb")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, old, sha(t, h.kubelet()))
	require.Equal(t, "v1.33.0", res.Details["runningVersion"])

	coord.enqueue(api.Operation{ID: "rb-unknown", Kind: api.OpRollback, Rollback: &api.Rollback{OperationID: "nope"}})
	res = coord.waitResult(t, "rb-unknown")
	require.Equal(t, api.OpFailed, res.State)
	require.Contains(t, res.Message, "rollback unavailable")
}

// TestUpgradeBinaryFromCoordinatorPath: an artifact URL that is a path is
// fetched from the coordinator members the agent knows, moving on from a
// member that does not have it.
func TestUpgradeBinaryFromCoordinatorPath(t *testing.T) {
	coord := newFakeCoordinator(t)
	other := &fakeCoordinator{coord.Peer(t)}
	h := newFakeHost(t, coord)
	h.cfg.Coordinator = coord.URL + "," + other.URL
	h.startAtFirst(t)
	newBin := kubeletScript("v1.34.0", false)
	path, sum := other.ServeArtifact("v1.34.0/kubelet", newBin)
	stop, _ := runAgent(t, h.cfg)

	coord.enqueue(upgradeOp("op-1", path, sum, "v1.34.0"))
	res := coord.waitResult(t, "op-1")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, sum, sha(t, h.kubelet()))
	require.NoError(t, stop())
}

// TestRollbackOfFailedOrNoOpUpgrades: what a pool rollback sends for every
// component an upgrade operation may have changed (SPEC §16). The undo of
// an upgrade whose new kubelet never became healthy (the agent restored
// the previous binary then) restores it again — nothing to copy — and
// restarts it healthy; the undo of an upgrade that changed nothing (the
// binary was already at its sha256, or the download failed before any
// change) succeeds at once with nothing restored and no restart.
func TestRollbackOfFailedOrNoOpUpgrades(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	old := sha(t, h.kubelet())
	brokenURL, brokenSum := h.serve("kubelet-broken", kubeletScript("v1.34.0", true))
	goodURL, _ := h.serve("kubelet", kubeletScript("v1.34.0", false))
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(upgradeOp("broken", brokenURL, brokenSum, "v1.34.0"))
	require.Equal(t, api.OpFailed, coord.waitResult(t, "broken").State)
	restarts := h.restartCount("kubelet.service")
	coord.enqueue(api.Operation{ID: "rb-broken", Kind: api.OpRollback, Rollback: &api.Rollback{OperationID: "broken"}})
	res := coord.waitResult(t, "rb-broken")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, old, sha(t, h.kubelet()))
	require.Equal(t, "v1.33.0", res.Details["runningVersion"])
	require.Equal(t, restarts+1, h.restartCount("kubelet.service"))

	coord.enqueue(upgradeOp("bad-sum", goodURL, brokenSum, "v1.34.0"))
	require.Equal(t, api.OpFailed, coord.waitResult(t, "bad-sum").State)
	coord.enqueue(upgradeOp("same", brokenURL, old, "v1.33.0"))
	require.Equal(t, api.OpSucceeded, coord.waitResult(t, "same").State)
	for _, id := range []string{"bad-sum", "same"} {
		restarts := h.restartCount("kubelet.service")
		coord.enqueue(api.Operation{ID: "rb-" + id, Kind: api.OpRollback, Rollback: &api.Rollback{OperationID: id}})
		res := coord.waitResult(t, "rb-"+id)
		require.Equal(t, api.OpSucceeded, res.State, res.Message)
		require.Equal(t, "nothing: operation "+id+" changed nothing", res.Details["restored"])
		require.Equal(t, restarts, h.restartCount("kubelet.service"), "nothing restarted")
		require.Equal(t, old, sha(t, h.kubelet()))
	}
}
