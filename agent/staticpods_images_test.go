package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

func TestSetImages(t *testing.T) {
	doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-apiserver\nspec:\n  containers:\n  - name: kube-apiserver\n    image: registry.k8s.io/kube-apiserver:v1.33.13\n    command: [kube-apiserver, --advertise-address=10.77.0.11]\n  - name: sidecar\n    image: side:1\n"
	out, changed, err := setImages([]byte(doc), map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v1.34.4"})
	require.NoError(t, err)
	require.True(t, changed)
	pods, err := manifestPods("x.yaml", out)
	require.NoError(t, err)
	require.Equal(t, []expectedPod{{name: "kube-apiserver", image: "registry.k8s.io/kube-apiserver:v1.34.4"}, {name: "kube-apiserver", image: "side:1"}}, pods)
	require.Contains(t, out, "--advertise-address=10.77.0.11", "host-specific settings stay")

	_, changed, err = setImages([]byte(doc), map[string]string{"etcd": "etcd:3.6"})
	require.NoError(t, err)
	require.False(t, changed)
	_, _, err = setImages([]byte("{{{"), map[string]string{"x": "y"})
	require.Error(t, err)
}

// TestUpgradeStaticPodsByImage moves a host's own manifests to new images,
// leaving manifests without a matching container alone.
func TestUpgradeStaticPodsByImage(t *testing.T) {
	pod := func(name, image string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: kube-system\nspec:\n  containers:\n  - name: " + name + "\n    image: " + image + "\n"
	}
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	dir := filepath.Join(h.root, "etc/kubernetes/manifests")
	oldLB := pod("cplb", "k8s/cplb:1")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-apiserver.yaml"), []byte(pod("kube-apiserver", "k8s/apiserver:v1.33.0")), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cplb.yaml"), []byte(oldLB), 0o600))
	_, _ = runAgent(t, h.cfg)

	coord.enqueue(api.Operation{ID: "sp", Kind: api.OpUpgradeStaticPods,
		UpgradeStaticPods: &api.UpgradeStaticPods{Version: "v1.34.0", Images: map[string]string{"kube-apiserver": "k8s/apiserver:v1.34.0", "etcd": "k8s/etcd:3.6"}}})
	res := coord.waitResult(t, "sp")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, "kube-apiserver.yaml", res.Details["manifests"])
	b, err := os.ReadFile(filepath.Join(dir, "kube-apiserver.yaml"))
	require.NoError(t, err)
	pods, err := manifestPods("kube-apiserver.yaml", string(b))
	require.NoError(t, err)
	require.Equal(t, "k8s/apiserver:v1.34.0", pods[0].image)
	b, err = os.ReadFile(filepath.Join(dir, "cplb.yaml"))
	require.NoError(t, err)
	require.Equal(t, oldLB, string(b), "a manifest without a matching container is untouched")

	// A host with none of the containers: nothing to do, success.
	coord.enqueue(api.Operation{ID: "sp2", Kind: api.OpUpgradeStaticPods,
		UpgradeStaticPods: &api.UpgradeStaticPods{Version: "v1.34.0", Images: map[string]string{"etcd": "k8s/etcd:3.6"}}})
	res = coord.waitResult(t, "sp2")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Contains(t, res.Details["note"], "no static pod")
}
