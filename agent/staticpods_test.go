package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

func TestUpgradeStaticPods(t *testing.T) {
	oldAPI := manifest("kube-apiserver", "k8s/apiserver:v1.33.0")
	oldEtcd := manifest("etcd", "k8s/etcd:3.5")
	tests := []struct {
		name      string
		manifests map[string]string
		wantState api.OperationState
		wantMsg   string
		wantFiles map[string]string
	}{
		{
			name:      "new pods run",
			manifests: map[string]string{"kube-apiserver.yaml": manifest("kube-apiserver", "k8s/apiserver:v1.34.0"), "extra.yaml": manifest("extra", "k8s/extra:1")},
			wantState: api.OpSucceeded,
			wantFiles: map[string]string{"kube-apiserver.yaml": manifest("kube-apiserver", "k8s/apiserver:v1.34.0"), "etcd.yaml": oldEtcd, "extra.yaml": manifest("extra", "k8s/extra:1")},
		},
		{
			name:      "timeout restores backup",
			manifests: map[string]string{"kube-apiserver.yaml": manifest("kube-apiserver", "k8s/apiserver:bad"), "extra.yaml": manifest("extra", "k8s/extra:1")},
			wantState: api.OpFailed,
			wantMsg:   "previous manifests restored",
			wantFiles: map[string]string{"kube-apiserver.yaml": oldAPI, "etcd.yaml": oldEtcd},
		},
		{
			name:      "unparsable manifest refused",
			manifests: map[string]string{"kube-apiserver.yaml": "{{{"},
			wantState: api.OpFailed,
			wantMsg:   "unknown or invalid operation",
			wantFiles: map[string]string{"kube-apiserver.yaml": oldAPI, "etcd.yaml": oldEtcd},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			coord := newFakeCoordinator(t)
			h := newFakeHost(t, coord)
			dir := filepath.Join(h.root, "etc/kubernetes/manifests")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-apiserver.yaml"), []byte(oldAPI), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte(oldEtcd), 0o600))
			_, _ = runAgent(t, h.cfg)

			coord.enqueue(api.Operation{ID: "sp", Kind: api.OpUpgradeStaticPods,
				UpgradeStaticPods: &api.UpgradeStaticPods{Version: "v1.34.0", Manifests: tt.manifests}})
			res := coord.waitResult(t, "sp")
			require.Equal(t, tt.wantState, res.State, res.Message)
			require.Contains(t, res.Message, tt.wantMsg)

			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			got := map[string]string{}
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				require.NoError(t, err)
				got[e.Name()] = string(b)
			}
			require.Equal(t, tt.wantFiles, got)
		})
	}
}

func TestRollbackStaticPods(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	dir := filepath.Join(h.root, "etc/kubernetes/manifests")
	oldAPI := manifest("kube-apiserver", "k8s/apiserver:v1.33.0")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-apiserver.yaml"), []byte(oldAPI), 0o600))
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(api.Operation{ID: "sp", Kind: api.OpUpgradeStaticPods, UpgradeStaticPods: &api.UpgradeStaticPods{
		Version: "v1.34.0", Manifests: map[string]string{"kube-apiserver.yaml": manifest("kube-apiserver", "k8s/apiserver:v1.34.0")}}})
	require.Equal(t, api.OpSucceeded, coord.waitResult(t, "sp").State)
	coord.enqueue(api.Operation{ID: "rb", Kind: api.OpRollback, Rollback: &api.Rollback{OperationID: "sp"}})
	res := coord.waitResult(t, "rb")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	b, err := os.ReadFile(filepath.Join(dir, "kube-apiserver.yaml"))
	require.NoError(t, err)
	require.Equal(t, oldAPI, string(b))
}
