package kubetest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestMain(m *testing.M) { os.Exit(kubetest.RunMain(m)) }

func TestControlPlane(t *testing.T) {
	cp := kubetest.Shared(t)
	require.Same(t, cp, kubetest.Shared(t), "one control plane per package")
	ctx := context.Background()
	cs := cp.Clientset

	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	t.Logf("kube-apiserver %s", v.GitVersion)
	require.NotEqual(t, "v0.0.0-master+$Format:%H$", v.GitVersion, "binaries built without version ldflags")

	node := kubetest.UniqueName("node")
	n := cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.34.4"})
	require.Equal(t, "v1.34.4", n.Status.NodeInfo.KubeletVersion)
	require.Equal(t, corev1.ConditionTrue, n.Status.Conditions[0].Status)

	ns := cp.Namespace(t)
	pod := cp.RunPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{"app": "p"}},
		Spec:       corev1.PodSpec{NodeName: node},
	})
	require.Equal(t, corev1.PodRunning, pod.Status.Phase)

	// The disruption controller runs: the PDB gets a status.
	_, err = cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(0)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "p"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "p", metav1.GetOptions{})
		require.NoError(t, err)
		return p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 1
	}, 30*time.Second, 10*time.Millisecond, "PDB status never written: disruption controller not running")

	// Without a kubelet a deleted pod stays Terminating; the reaper ends it.
	require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, "p", metav1.DeleteOptions{}))
	got, err := cs.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, got.DeletionTimestamp)
	cp.ReapTerminating(t, node)
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 10*time.Millisecond, "reaper did not finish the deletion")
}
