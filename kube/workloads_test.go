package kube_test

import (
	"context"
	"testing"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestDrainWorkloadsComeBack: a drain reports the controllers of the pods
// it evicted — a Deployment through its ReplicaSet, a StatefulSet, not a
// bare pod — and WorkloadsReady waits until each is back to its desired
// ready replicas (no controller runs here: the test writes their status
// as the controllers would).
func TestDrainWorkloadsComeBack(t *testing.T) {
	cp := kubetest.Shared(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	node := kubetest.UniqueName("workloads")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})
	apps := cp.Clientset.AppsV1()

	web := map[string]string{"app": "web"}
	dep, err := apps.Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: web}, Template: template(web)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	rs, err := apps.ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-6d4f", OwnerReferences: owner("Deployment", dep.Name, dep.UID)},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: web}, Template: template(web)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	db := map[string]string{"app": "db"}
	sts, err := apps.StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: db}, Template: template(db)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	for _, name := range []string{"web-6d4f-a", "web-6d4f-b"} {
		p := newPod(ns, name, node)
		p.Labels = web
		p.OwnerReferences = owner("ReplicaSet", rs.Name, rs.UID)
		cp.RunPod(t, p)
	}
	p := newPod(ns, "db-0", node)
	p.Labels = db
	p.OwnerReferences = owner("StatefulSet", sts.Name, sts.UID)
	cp.RunPod(t, p)
	cp.RunPod(t, newPod(ns, "bare", node))
	cp.ReapTerminating(t, node)

	cfg, fc := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	res, err := drain(t, c, fc, cfg.PollInterval, node, kube.DrainOptions{})
	require.NoError(t, err)
	require.Len(t, res.Evicted, 4)
	require.Equal(t, []kube.WorkloadRef{
		{Kind: kube.KindDeployment, Namespace: ns, Name: "web"},
		{Kind: kube.KindStatefulSet, Namespace: ns, Name: "db"},
	}, res.Workloads)

	err = c.WorkloadsReady(ctx, res.Workloads)
	require.ErrorIs(t, err, kube.ErrWorkloadsNotReady)
	require.Contains(t, err.Error(), "Deployment "+ns+"/web: 0 of 2 ready")
	require.Contains(t, err.Error(), "StatefulSet "+ns+"/db: 0 of 1 ready")

	dep, err = apps.Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	dep.Status.Replicas, dep.Status.ReadyReplicas = 2, 1
	_, err = apps.Deployments(ns).UpdateStatus(ctx, dep, metav1.UpdateOptions{})
	require.NoError(t, err)
	sts, err = apps.StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
	require.NoError(t, err)
	sts.Status.Replicas, sts.Status.ReadyReplicas = 1, 1
	_, err = apps.StatefulSets(ns).UpdateStatus(ctx, sts, metav1.UpdateOptions{})
	require.NoError(t, err)
	err = c.WorkloadsReady(ctx, res.Workloads)
	require.ErrorIs(t, err, kube.ErrWorkloadsNotReady)
	require.Equal(t, "kube: workloads not back to their desired ready replicas: Deployment "+ns+"/web: 1 of 2 ready", err.Error())

	dep, err = apps.Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	dep.Status.Replicas, dep.Status.ReadyReplicas = 2, 2
	_, err = apps.Deployments(ns).UpdateStatus(ctx, dep, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.WorkloadsReady(ctx, res.Workloads))

	// A controller that was deleted is not waited for.
	require.NoError(t, apps.StatefulSets(ns).Delete(ctx, "db", metav1.DeleteOptions{}))
	require.NoError(t, c.WorkloadsReady(ctx, append(res.Workloads, kube.WorkloadRef{Kind: kube.KindReplicaSet, Namespace: ns, Name: "gone"})))
}
