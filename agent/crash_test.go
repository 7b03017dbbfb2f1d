package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

var errCrash = errors.New("simulated crash")

// crashAt returns hooks that "kill" the agent the first time step is
// reached, and a channel closed when that happened.
func crashAt(step string) (Hooks, <-chan struct{}) {
	crashed := make(chan struct{})
	var once sync.Once
	return HookFunc(func(_ context.Context, _ string, s string) error {
		if s != step {
			return nil
		}
		err := error(nil)
		once.Do(func() { err = errCrash; close(crashed) })
		return err
	}), crashed
}

// crashAndResume runs op on an agent that dies at step, checks the host is
// not torn, then starts a fresh agent on the same disk and returns the
// final result.
func crashAndResume(t *testing.T, coord *fakeCoordinator, h *fakeHost, op api.Operation, step string,
	onCrash func()) api.OperationResult {
	t.Helper()
	cfg := h.cfg
	hooks, crashed := crashAt(step)
	cfg.Hooks = hooks
	stopCrashed, done := runAgent(t, cfg)
	coord.enqueue(op)
	select {
	case <-done:
		err := stopCrashed()
		require.ErrorIs(t, err, ErrAborted)
		require.ErrorIs(t, err, errCrash)
	case <-time.After(30 * time.Second):
		t.Fatalf("agent did not stop at step %s", step)
	}
	<-crashed
	require.Empty(t, coord.resultsFor(op.ID), "a crashed operation has reported no final result")
	onCrash()

	stop, _ := runAgent(t, h.cfg)
	res := coord.waitResult(t, op.ID)
	require.NoError(t, stop())
	return res
}

func TestUpgradeBinaryCrashAtEveryStep(t *testing.T) {
	steps := []string{StepStarted, StepDownloaded, StepVerified, StepBackedUp, StepRenamed,
		StepRestarted, StepHealthy, StepFinished}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			coord := newFakeCoordinator(t)
			h := newFakeHost(t, coord)
			old := sha(t, h.kubelet())
			url, sum := h.serve("kubelet", kubeletScript("v1.34.0", false))

			res := crashAndResume(t, coord, h, upgradeOp("op", url, sum, "v1.34.0"), step, func() {
				cur := sha(t, h.kubelet())
				require.Contains(t, []string{old, sum}, cur, "binary torn at crash")
			})
			require.Equal(t, api.OpSucceeded, res.State, res.Message)
			require.Equal(t, sum, sha(t, h.kubelet()))
			require.Equal(t, old, sha(t, h.kubelet()+prevSuffix), "backup holds the old binary")
			require.Equal(t, 1, h.restartCount("kubelet.service"), "restarted exactly once")
			require.Len(t, coord.resultsFor("op"), 1)
			noTempFiles(t, filepath.Dir(h.kubelet()))
		})
	}
}

func TestUpgradeBinaryCrashWhileRestoring(t *testing.T) {
	for _, step := range []string{StepRestoring, StepRestored} {
		t.Run(step, func(t *testing.T) {
			coord := newFakeCoordinator(t)
			h := newFakeHost(t, coord)
			old := sha(t, h.kubelet())
			url, sum := h.serve("kubelet", kubeletScript("v1.34.0", true))
			res := crashAndResume(t, coord, h, upgradeOp("op", url, sum, "v1.34.0"), step, func() {
				require.Contains(t, []string{old, sum}, sha(t, h.kubelet()))
			})
			require.Equal(t, api.OpFailed, res.State)
			require.Contains(t, res.Message, "previous binary restored")
			require.Equal(t, old, sha(t, h.kubelet()))
		})
	}
}

func TestUpgradeStaticPodsCrashAtEveryStep(t *testing.T) {
	steps := []string{StepStarted, StepBackedUp, StepWritten, StepHealthy, StepFinished}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			coord := newFakeCoordinator(t)
			h := newFakeHost(t, coord)
			dir := filepath.Join(h.root, "etc/kubernetes/manifests")
			oldAPI := manifest("kube-apiserver", "registry.k8s.io/kube-apiserver:v1.33.0")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-apiserver.yaml"), []byte(oldAPI), 0o600))
			newAPI := manifest("kube-apiserver", "registry.k8s.io/kube-apiserver:v1.34.0")
			op := api.Operation{ID: "sp", Kind: api.OpUpgradeStaticPods, UpgradeStaticPods: &api.UpgradeStaticPods{
				Version: "v1.34.0", Manifests: map[string]string{"kube-apiserver.yaml": newAPI}}}

			res := crashAndResume(t, coord, h, op, step, func() {
				b, err := os.ReadFile(filepath.Join(dir, "kube-apiserver.yaml"))
				require.NoError(t, err)
				require.Contains(t, []string{oldAPI, newAPI}, string(b), "manifest torn at crash")
			})
			require.Equal(t, api.OpSucceeded, res.State, res.Message)
			b, err := os.ReadFile(filepath.Join(dir, "kube-apiserver.yaml"))
			require.NoError(t, err)
			require.Equal(t, newAPI, string(b))
			backup, err := os.ReadFile(filepath.Join(h.root, "var/lib/molt-agent/backups/sp/kube-apiserver.yaml"))
			require.NoError(t, err)
			require.Equal(t, oldAPI, string(backup), "backup taken once, of the old manifests")
		})
	}
}
