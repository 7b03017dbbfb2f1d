package kube_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// addonManifests is a small add-on in namespace ns: the kinds a release's
// add-ons hold, a DaemonSet and a Deployment among them.
func addonManifests(ns, crb, value string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: ServiceAccount
metadata: {name: proxy, namespace: %[1]s, labels: {app: proxy}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: proxy, namespace: %[1]s}
data: {mode: %[3]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[2]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-proxier}
subjects: [{kind: ServiceAccount, name: proxy, namespace: %[1]s}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: proxy, namespace: %[1]s}
spec:
  selector: {matchLabels: {app: proxy}}
  template:
    metadata: {labels: {app: proxy}}
    spec:
      containers: [{name: proxy, image: "example.com/proxy:%[3]s", imagePullPolicy: IfNotPresent}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: dns, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: dns}}
  template:
    metadata: {labels: {app: dns}}
    spec:
      containers: [{name: dns, image: "example.com/dns:1"}]
`, ns, crb, value)
}

func TestApplyIsIdempotentAndRecordsFieldManager(t *testing.T) {
	cp := kubetest.Shared(t)
	c := adminClient(t, cp)
	ctx := context.Background()
	ns := cp.Namespace(t)
	crb := kubetest.UniqueName("proxier")

	refs, err := c.Apply(ctx, addonManifests(ns, crb, "nftables"))
	require.NoError(t, err)
	require.Equal(t, []kube.ObjectRef{
		{APIVersion: "v1", Kind: "ServiceAccount", Namespace: ns, Name: "proxy"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "proxy"},
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding", Name: crb},
		{APIVersion: "apps/v1", Kind: "DaemonSet", Namespace: ns, Name: "proxy"},
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "dns"},
	}, refs)

	versions := func() map[string]string {
		out := map[string]string{}
		for _, r := range refs {
			m := objectMeta(t, cp, r)
			out[r.String()] = m.ResourceVersion
			var managers []string
			for _, f := range m.ManagedFields {
				if f.Operation == metav1.ManagedFieldsOperationApply {
					managers = append(managers, f.Manager)
				}
			}
			require.Equal(t, []string{kube.FieldManager}, managers, "%s: appliers", r)
		}
		return out
	}
	first := versions()

	again, err := c.Apply(ctx, addonManifests(ns, crb, "nftables"))
	require.NoError(t, err)
	require.Equal(t, refs, again)
	require.Equal(t, first, versions(), "a second apply of the same manifests changes no object")

	// Another manager changes a field molt owns and adds one of its own;
	// the next apply takes molt's field back (force) and leaves the other.
	cm, err := cp.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "proxy", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["mode"] = "iptables"
	cm.Data["extra"] = "kept"
	_, err = cp.Clientset.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	_, err = c.Apply(ctx, addonManifests(ns, crb, "nftables"))
	require.NoError(t, err)
	cm, err = cp.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "proxy", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"mode": "nftables", "extra": "kept"}, cm.Data)

	// A new version of the manifests changes the objects it changes.
	_, err = c.Apply(ctx, addonManifests(ns, crb, "v2"))
	require.NoError(t, err)
	ds, err := cp.Clientset.AppsV1().DaemonSets(ns).Get(ctx, "proxy", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "example.com/proxy:v2", ds.Spec.Template.Spec.Containers[0].Image)
	require.Equal(t, int64(2), ds.Generation)
}

func TestApplyRefusesBadManifests(t *testing.T) {
	cp := kubetest.Shared(t)
	c := adminClient(t, cp)
	ctx := context.Background()
	ns := cp.Namespace(t)

	refs, err := c.Apply(ctx, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: "+ns+"}\n---\n"+
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: typo, namespace: "+ns+"}\ndatta: {}\n"))
	require.ErrorIs(t, err, kube.ErrAPI, "an unknown field is refused")
	require.ErrorContains(t, err, "ConfigMap "+ns+"/typo")
	require.Len(t, refs, 1, "the objects before the bad one are applied")
	ok, err := c.Exists(ctx, "v1", "ConfigMap", ns, "typo")
	require.NoError(t, err)
	require.False(t, ok)

	_, err = c.Apply(ctx, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: "+ns+"}\n"))
	require.ErrorIs(t, err, kube.ErrManifest, "no name")
	_, err = c.Apply(ctx, []byte("apiVersion: v1\nkind: Gizmo\nmetadata: {name: g}\n"))
	require.ErrorIs(t, err, kube.ErrManifest)
}

// objectMeta reads an applied object's metadata through the typed client.
func objectMeta(t *testing.T, cp *kubetest.ControlPlane, r kube.ObjectRef) metav1.ObjectMeta {
	t.Helper()
	ctx := context.Background()
	var (
		m   metav1.ObjectMeta
		err error
	)
	cs := cp.Clientset
	switch r.Kind {
	case "ServiceAccount":
		o, e := cs.CoreV1().ServiceAccounts(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		m, err = metaOf(o, e)
	case "ConfigMap":
		o, e := cs.CoreV1().ConfigMaps(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		m, err = metaOf(o, e)
	case "ClusterRoleBinding":
		o, e := cs.RbacV1().ClusterRoleBindings().Get(ctx, r.Name, metav1.GetOptions{})
		m, err = metaOf(o, e)
	case "DaemonSet":
		o, e := cs.AppsV1().DaemonSets(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		m, err = metaOf(o, e)
	case "Deployment":
		o, e := cs.AppsV1().Deployments(r.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		m, err = metaOf(o, e)
	default:
		t.Fatalf("no reader for %s", r)
	}
	require.NoError(t, err, r.String())
	return m
}

func metaOf(o metav1.Object, err error) (metav1.ObjectMeta, error) {
	if err != nil {
		return metav1.ObjectMeta{}, err
	}
	return metav1.ObjectMeta{ResourceVersion: o.GetResourceVersion(), ManagedFields: o.GetManagedFields()}, nil
}
