package kube_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// adminClient is a Client built from the control plane's kubeconfig, the
// way callers outside tests build one, so it has a dynamic client.
func adminClient(t *testing.T, cp *kubetest.ControlPlane) *kube.Client {
	t.Helper()
	cfg, _ := testConfig(t, t0)
	c, err := kube.NewFromKubeconfig(cfg, cp.Kubeconfig)
	require.NoError(t, err)
	return c
}

func TestCreateObjectsCreatesOnceAndLeavesExistingAlone(t *testing.T) {
	cp := kubetest.Shared(t)
	c := adminClient(t, cp)
	ctx := context.Background()
	ns := kubetest.UniqueName("objects")
	crb := kubetest.UniqueName("crb")
	manifests := fmt.Sprintf(`# a comment-only document is skipped
---
apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
data:
  a: "1"
---
# Creating this again is refused as Invalid (its node port is taken, by
# itself), not AlreadyExists: CreateObjects must see it exists first.
apiVersion: v1
kind: Service
metadata:
  name: fixed-port
  namespace: %[1]s
spec:
  type: NodePort
  selector: {app: x}
  ports: [{port: 80, nodePort: 30999}]
---
{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
 "metadata": {"name": %[2]q},
 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
 "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "g"}]}
`, ns, crb)
	require.NoError(t, c.CreateObjects(ctx, []byte(manifests)))

	got, err := cp.Clientset.RbacV1().ClusterRoleBindings().Get(ctx, crb, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}, got.RoleRef)
	require.Equal(t, []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "g"}}, got.Subjects)

	// A changed manifest does not overwrite what exists: create, not apply.
	cm, err := cp.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, c.CreateObjects(ctx, []byte(manifests)), "second call must not fail on AlreadyExists")
	again, err := cp.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, cm.ResourceVersion, again.ResourceVersion)

	for _, c2 := range []struct {
		apiVersion, kind, ns, name string
		want                       bool
	}{
		{"v1", "ConfigMap", ns, "settings", true},
		{"v1", "ConfigMap", ns, "absent", false},
		{"v1", "Namespace", "", ns, true},
		{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "ignored", crb, true},
	} {
		ok, err := c.Exists(ctx, c2.apiVersion, c2.kind, c2.ns, c2.name)
		require.NoError(t, err)
		require.Equal(t, c2.want, ok, "%s %s/%s", c2.kind, c2.ns, c2.name)
	}
}

func TestCreateObjectsRefusesBadManifests(t *testing.T) {
	cp := kubetest.Shared(t)
	c := adminClient(t, cp)
	ctx := context.Background()
	ns := cp.Namespace(t)

	err := c.CreateObjects(ctx, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo, namespace: "+ns+"}\ndatta: {}\n"))
	require.ErrorIs(t, err, kube.ErrAPI, "strict field validation refuses an unknown field")
	ok, err := c.Exists(ctx, "v1", "ConfigMap", ns, "typo")
	require.NoError(t, err)
	require.False(t, ok)

	require.ErrorIs(t, c.CreateObjects(ctx, []byte("apiVersion: v1\nkind: Gizmo\nmetadata: {name: g}\n")), kube.ErrManifest)
	require.ErrorIs(t, c.CreateObjects(ctx, []byte("kind: ConfigMap\nmetadata: {name: g}\n")), kube.ErrManifest)
	require.ErrorIs(t, c.CreateObjects(ctx, []byte("a: [")), kube.ErrManifest)

	cfg, _ := testConfig(t, t0)
	bare := kube.New(cfg, cp.Clientset)
	require.ErrorIs(t, bare.CreateObjects(ctx, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n")), kube.ErrConfig)
}

func TestCheckManifests(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: i, imagePullPolicy: Never}]\n"
	cases := []struct {
		name, manifests string
		ok              bool
	}{
		{"pod", pod, true},
		{"two documents", pod + "---\n" + pod, true},
		{"empty", "", true},
		{"unknown field", pod + "  hostNetwrok: true\n", false},
		{"wrong type", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {hostNetwork: \"yes\"}\n", false},
		{"unknown kind", "apiVersion: v1\nkind: Gizmo\nmetadata: {name: g}\n", false},
		{"second document bad", pod + "---\napiVersion: apps/v1\nkind: Deployment\nspec: {replica: 2}\n", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := kube.CheckManifests([]byte(c.manifests))
			if c.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, kube.ErrManifest)
			}
		})
	}
}
