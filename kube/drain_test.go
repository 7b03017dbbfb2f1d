package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// newPod is a pod bound to node with optional labels and annotations.
func newPod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec:       corev1.PodSpec{NodeName: node},
	}
}

// template is a minimal pod template for controller objects that no
// controller acts on (no ReplicaSet or DaemonSet controller runs).
func template(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}},
	}
}

func owner(kind, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
}

func podExists(t *testing.T, cp *kubetest.ControlPlane, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := cp.Clientset.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return p
}

// pdbBlockedNode makes a Ready node running web-1 (held by a
// PodDisruptionBudget allowing no disruption, once the disruption
// controller processed it) and free (held by nothing); it returns the
// node and the namespace.
func pdbBlockedNode(t *testing.T, cp *kubetest.ControlPlane) (node, ns string) {
	t.Helper()
	ctx := context.Background()
	ns = cp.Namespace(t)
	node = kubetest.UniqueName("pdb")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})

	// maxUnavailable needs the pods' controller scale: a ReplicaSet object
	// (no controller acts on it) owns the pod.
	labels := map[string]string{"app": "web"}
	rs, err := cp.Clientset.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template(labels),
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod := newPod(ns, "web-1", node)
	pod.Labels = labels
	pod.OwnerReferences = owner("ReplicaSet", rs.Name, rs.UID)
	cp.RunPod(t, pod)
	free := newPod(ns, "free", node)
	cp.RunPod(t, free)
	cp.ReapTerminating(t, node)

	pdb, err := cp.Clientset.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool {
		p, err := cp.Clientset.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, pdb.Name, metav1.GetOptions{})
		require.NoError(t, err)
		return p.Status.ObservedGeneration == p.Generation && p.Status.ExpectedPods == 1
	}, "disruption controller did not process the PDB")

	return node, ns
}

func TestDrainPDBKeepsPodUntilTimeout(t *testing.T) {
	cp := kubetest.Shared(t)
	ctx := context.Background()
	node, ns := pdbBlockedNode(t, cp)
	cfg, fc := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)

	blocking, err := c.BlockingPDBs(ctx, node)
	require.NoError(t, err)
	require.Equal(t, []kube.PDBRef{{Namespace: ns, Name: "web", Pods: []string{"web-1"}}}, blocking)

	res, err := drain(t, c, fc, cfg.PollInterval, node, kube.DrainOptions{Automatic: true})
	require.NoError(t, err, "a timed-out drain is a result, not an error")
	require.True(t, res.TimedOut)
	require.Equal(t, t0, res.Started)
	require.GreaterOrEqual(t, res.Finished.Sub(res.Started), kube.DefaultDrainTimeout)
	require.Less(t, res.Finished.Sub(res.Started), kube.DefaultDrainTimeout+cfg.PollInterval)
	require.Equal(t, []kube.PodRef{{Namespace: ns, Name: "free"}}, res.Evicted)
	require.Len(t, res.LeftBehind, 1)
	left := res.LeftBehind[0]
	require.Equal(t, ns, left.Namespace)
	require.Equal(t, "web-1", left.Name)
	require.Equal(t, kube.ReasonPDB, left.Reason)
	require.Contains(t, left.Message, "disruption budget")

	p := podExists(t, cp, ns, "web-1")
	require.NotNil(t, p, "PDB-protected pod was removed")
	require.Nil(t, p.DeletionTimestamp, "PDB-protected pod was evicted")
}

// TestSurgeDrainHonoursPDBForAnHour: a MIG surge node's drain
// (DrainSurge) honours a PodDisruptionBudget for an hour, as GKE's surge
// upgrades, where a bare-metal node's gives up after 20 minutes; on the
// injected clock.
func TestSurgeDrainHonoursPDBForAnHour(t *testing.T) {
	cp := kubetest.Shared(t)
	node, ns := pdbBlockedNode(t, cp)
	cfg, fc := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)

	res, err := drain(t, c, fc, cfg.PollInterval, node, kube.DrainOptions{Kind: kube.DrainSurge})
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	took := res.Finished.Sub(res.Started)
	require.GreaterOrEqual(t, took, kube.DefaultSurgeDrainTimeout, "a surge node's drain gave up before the hour")
	require.Less(t, took, kube.DefaultSurgeDrainTimeout+cfg.PollInterval)
	require.Equal(t, []kube.PodRef{{Namespace: ns, Name: "free"}}, res.Evicted)
	require.Len(t, res.LeftBehind, 1)
	require.Equal(t, kube.ReasonPDB, res.LeftBehind[0].Reason)
	p := podExists(t, cp, ns, "web-1")
	require.NotNil(t, p)
	require.Nil(t, p.DeletionTimestamp, "the PDB-protected pod was evicted")
}

func TestDrainStuckTerminating(t *testing.T) {
	cp := kubetest.Shared(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	node := kubetest.UniqueName("stuck")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})
	stuck := newPod(ns, "stuck", node)
	stuck.Finalizers = []string{"molt.dev/test-hold"}
	cp.RunPod(t, stuck)
	cp.RunPod(t, newPod(ns, "ok", node))
	cp.ReapTerminating(t, node)
	t.Cleanup(func() {
		// Release the finalizer so the pod does not outlive the test.
		_, _ = cp.Clientset.CoreV1().Pods(ns).Patch(ctx, "stuck", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})

	cfg, fc := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	res, err := drain(t, c, fc, cfg.PollInterval, node, kube.DrainOptions{})
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Equal(t, []kube.PodRef{{Namespace: ns, Name: "ok"}}, res.Evicted)
	require.Len(t, res.LeftBehind, 1)
	require.Equal(t, kube.ReasonTerminating, res.LeftBehind[0].Reason)
	require.Equal(t, "stuck", res.LeftBehind[0].Name)
	require.Contains(t, res.LeftBehind[0].Message, "molt.dev/test-hold")

	p := podExists(t, cp, ns, "stuck")
	require.NotNil(t, p)
	require.NotNil(t, p.DeletionTimestamp)
}

func TestDrainSkipsDaemonSetMirrorAndFinishedPods(t *testing.T) {
	cp := kubetest.Shared(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	node := kubetest.UniqueName("skip")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})

	labels := map[string]string{"app": "agent"}
	ds, err := cp.Clientset.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template(labels)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	dsPod := newPod(ns, "agent-x", node)
	dsPod.Labels = labels
	dsPod.OwnerReferences = owner("DaemonSet", ds.Name, ds.UID)
	cp.RunPod(t, dsPod)

	mirror := newPod(ns, "static-"+node, node)
	mirror.Annotations[corev1.MirrorPodAnnotationKey] = "hash"
	cp.RunPod(t, mirror)

	done := cp.RunPod(t, newPod(ns, "job-done", node))
	done.Status.Phase = corev1.PodSucceeded
	_, err = cp.Clientset.CoreV1().Pods(ns).UpdateStatus(ctx, done, metav1.UpdateOptions{})
	require.NoError(t, err)

	cp.RunPod(t, newPod(ns, "app", node))
	cp.ReapTerminating(t, node)

	cfg, fc := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	res, err := drain(t, c, fc, cfg.PollInterval, node, kube.DrainOptions{Automatic: true})
	require.NoError(t, err)
	require.False(t, res.TimedOut)
	require.Equal(t, []kube.PodRef{{Namespace: ns, Name: "app"}}, res.Evicted)
	require.Empty(t, res.LeftBehind)
	for _, name := range []string{"agent-x", mirror.Name, "job-done"} {
		p := podExists(t, cp, ns, name)
		require.NotNil(t, p, name)
		require.Nil(t, p.DeletionTimestamp, name)
	}
}

func TestDrainSafeToEvict(t *testing.T) {
	cp := kubetest.Shared(t)
	cases := []struct {
		name      string
		automatic bool
		age       time.Duration // fake now - pod start
		protected bool
	}{
		{name: "automatic day 6 23h protected", automatic: true, age: 6*24*time.Hour + 23*time.Hour, protected: true},
		{name: "automatic day 7 evicted", automatic: true, age: 7*24*time.Hour + time.Minute},
		{name: "manual young evicted", automatic: false, age: time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := cp.Namespace(t)
			node := kubetest.UniqueName("protect")
			cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})
			pod := newPod(ns, "batch", node)
			pod.Annotations[kube.AnnotationSafeToEvict] = "false"
			pod.Status.StartTime = &metav1.Time{Time: t0}
			cp.RunPod(t, pod)
			cp.ReapTerminating(t, node)

			cfg, fc := testConfig(t, t0.Add(tc.age))
			c := kube.New(cfg, cp.Clientset)
			evictableAt := t0.Add(kube.DefaultProtectionAge)

			prot, err := c.ProtectedPods(ctx, node, fc.Now())
			require.NoError(t, err)
			if tc.protected {
				require.Len(t, prot, 1)
				require.Equal(t, kube.ReasonProtected, prot[0].Reason)
				require.True(t, evictableAt.Equal(prot[0].EvictableAt), "EvictableAt %v", prot[0].EvictableAt)
			} else if tc.automatic {
				require.Empty(t, prot)
			}

			res, err := drain(t, c, fc, cfg.PollInterval, node, kube.DrainOptions{Automatic: tc.automatic})
			require.NoError(t, err)
			require.False(t, res.TimedOut, "protected pods do not hold the drain")
			if tc.protected {
				require.Empty(t, res.Evicted)
				require.Len(t, res.LeftBehind, 1)
				require.Equal(t, kube.ReasonProtected, res.LeftBehind[0].Reason)
				require.True(t, evictableAt.Equal(res.LeftBehind[0].EvictableAt))
				p := podExists(t, cp, ns, "batch")
				require.NotNil(t, p)
				require.Nil(t, p.DeletionTimestamp)
				return
			}
			require.Equal(t, []kube.PodRef{{Namespace: ns, Name: "batch"}}, res.Evicted)
			require.Empty(t, res.LeftBehind)
			require.Nil(t, podExists(t, cp, ns, "batch"))
		})
	}
}

func TestDrainCapsGracePeriod(t *testing.T) {
	cp := kubetest.Shared(t)
	ns := cp.Namespace(t)
	node := kubetest.UniqueName("grace")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})
	cases := []struct {
		pod       string
		grace     *int64
		wantGrace int64
	}{
		{pod: "two-hours", grace: ptr.To[int64](7200), wantGrace: 3600},
		{pod: "ten-minutes", grace: ptr.To[int64](600), wantGrace: 600},
		{pod: "unset", grace: nil, wantGrace: corev1.DefaultTerminationGracePeriodSeconds},
	}
	for _, tc := range cases {
		p := newPod(ns, tc.pod, node)
		p.Spec.TerminationGracePeriodSeconds = tc.grace
		cp.RunPod(t, p)
	}
	// No reaper: without a kubelet the evicted pods stay Terminating with
	// the grace period the eviction asked for.
	cfg, fc := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	res, err := drain(t, c, fc, cfg.PollInterval, node, kube.DrainOptions{})
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Len(t, res.LeftBehind, len(cases))
	for _, tc := range cases {
		t.Run(tc.pod, func(t *testing.T) {
			p := podExists(t, cp, ns, tc.pod)
			require.NotNil(t, p)
			require.NotNil(t, p.DeletionTimestamp)
			require.Equal(t, tc.wantGrace, *p.DeletionGracePeriodSeconds)
		})
	}
	for _, l := range res.LeftBehind {
		require.Equal(t, kube.ReasonTerminating, l.Reason, l.Name)
	}
}
