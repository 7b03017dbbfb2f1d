package lab

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The apiserver's kubelet-client certificate must be in the group the
// binding names, or kubelets refuse `kubectl logs` and `exec`.
func TestBindClusterAdminsCoversKubeletClientAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	require.NoError(t, bindClusterAdmins(ctx, cs))
	require.NoError(t, bindClusterAdmins(ctx, cs), "a second Up must not fail on AlreadyExists")

	crb, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, "kubeadm:cluster-admins", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}, crb.RoleRef)
	require.Equal(t, []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "kubeadm:cluster-admins"}}, crb.Subjects)

	dir := t.TempDir()
	p, err := EnsurePKI(dir, testPKISpec())
	require.NoError(t, err)
	cert := readCert(t, filepath.Join(p.Dir, "apiserver-kubelet-client.crt"))
	require.Contains(t, cert.Subject.Organization, crb.Subjects[0].Name)
}
