package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// clusterFixture is a cluster whose nodes exist in a real API server:
// ready, not ready, and one absent; a budget with maxUnavailable 0 over a
// pod on the ready node; a protected pod on the not-ready node.
type clusterFixture struct {
	ns                    string
	ready, notReady, gone string
	started               time.Time
}

func newClusterFixture(t *testing.T, cp *kubetest.ControlPlane) clusterFixture {
	t.Helper()
	ctx := context.Background()
	f := clusterFixture{
		ns:    cp.Namespace(t),
		ready: kubetest.UniqueName("pf-ready"), notReady: kubetest.UniqueName("pf-notready"), gone: kubetest.UniqueName("pf-gone"),
		// Whole seconds: pod timestamps are stored with second precision.
		started: time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC),
	}
	cp.CreateNode(t, f.ready, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.2"})
	cp.CreateNode(t, f.notReady, kubetest.NodeStatus{Ready: false, KubeletVersion: "v1.33.2"})

	// maxUnavailable needs the pods' controller scale: a ReplicaSet object
	// (no controller acts on it) owns the pod.
	labels := map[string]string{"app": "db"}
	rs, err := cp.Clientset.AppsV1().ReplicaSets(f.ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cp.RunPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "db-0", Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: f.ready},
	})
	for name, spec := range map[string]policyv1.PodDisruptionBudgetSpec{
		"db-frozen": {MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
		"db-loose":  {MinAvailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels}},
	} {
		_, err := cp.Clientset.PolicyV1().PodDisruptionBudgets(f.ns).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// Wait (polling, bounded) until the disruption controller has judged
	// both budgets, so "db-loose" allows a disruption and must not be listed.
	require.Eventually(t, func() bool {
		list, err := cp.Clientset.PolicyV1().PodDisruptionBudgets(f.ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range list.Items {
			if p.Status.ObservedGeneration != p.Generation || p.Status.ExpectedPods != 1 {
				return false
			}
		}
		return len(list.Items) == 2
	}, time.Minute, 20*time.Millisecond, "disruption controller did not process the budgets")

	protected := func(name string, started time.Time) {
		cp.RunPod(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name,
				Annotations: map[string]string{kube.AnnotationSafeToEvict: "false"}},
			Spec:   corev1.PodSpec{NodeName: f.notReady},
			Status: corev1.PodStatus{StartTime: &metav1.Time{Time: started}},
		})
	}
	protected("train-0", f.started)
	protected("train-old", f.started.Add(-30*24*time.Hour)) // protection long over
	return f
}

func (f clusterFixture) nodes() []string { return []string{f.ready, f.notReady, f.gone} }

// TestPreflightReader reads each preflight source from a real API server
// (the package's shared control plane: it skips locally and fails under
// CI=true when the binaries are missing).
func TestPreflightReader(t *testing.T) {
	cp := kubetest.Shared(t)
	ctx := context.Background()
	f := newClusterFixture(t, cp)
	r := kube.NewPreflightReader(kube.New(kube.DefaultConfig(), cp.Clientset))

	t.Run("nodes ready, not ready, absent", func(t *testing.T) {
		nodes, err := r.Nodes(ctx, f.nodes())
		require.NoError(t, err)
		require.Equal(t, map[string]preflight.NodeInfo{
			f.ready:    {Ready: true, KubeletVersion: "v1.33.2"},
			f.notReady: {Ready: false, KubeletVersion: "v1.33.2"},
		}, nodes)
	})
	t.Run("control plane and etcd healthy", func(t *testing.T) {
		h, err := r.ControlPlane(ctx)
		require.NoError(t, err)
		require.True(t, h.Ready, h.Message)
		require.Empty(t, h.Failing)
		require.Contains(t, h.Passed, "etcd")
	})
	t.Run("PDB with maxUnavailable 0 reported", func(t *testing.T) {
		pdbs, err := r.BlockingPDBs(ctx, f.nodes())
		require.NoError(t, err)
		require.Equal(t, []preflight.PDBInfo{{Namespace: f.ns, Name: "db-frozen", Nodes: []string{f.ready}, Pods: []string{"db-0"}}}, pdbs)
	})
	t.Run("safe-to-evict=false pod reported with its date", func(t *testing.T) {
		at := f.started.Add(48 * time.Hour)
		pods, err := r.ProtectedPods(ctx, f.nodes(), at)
		require.NoError(t, err)
		require.Len(t, pods, 1)
		require.Equal(t, preflight.ProtectedPod{Namespace: f.ns, Name: "train-0", Node: f.notReady, EvictableAt: f.started.Add(7 * 24 * time.Hour)},
			preflight.ProtectedPod{Namespace: pods[0].Namespace, Name: pods[0].Name, Node: pods[0].Node, EvictableAt: pods[0].EvictableAt.UTC()})

		later, err := r.ProtectedPods(ctx, f.nodes(), f.started.Add(8*24*time.Hour))
		require.NoError(t, err)
		require.Empty(t, later, "protection ends after 7 days")
	})
}

// TestPreflightGatherAndRun gathers a real cluster's state and runs
// the cluster-facing checks on it.
func TestPreflightGatherAndRun(t *testing.T) {
	cp := kubetest.Shared(t)
	f := newClusterFixture(t, cp)
	in := preflight.Input{
		Cluster: phases.ClusterSpec{Name: "c1", Kind: phases.KindStandalone, Pools: []phases.Pool{
			{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: f.ready}}},
			{Name: "w", Role: phases.RoleWorker, Nodes: []phases.Node{{Name: f.notReady}, {Name: f.gone}}},
		}},
		Now: f.started.Add(time.Hour),
	}
	r := kube.NewPreflightReader(kube.New(kube.DefaultConfig(), cp.Clientset))
	preflight.GatherCluster(context.Background(), r, &in)

	rep, err := preflight.RunOnly(in, preflight.IDNodesReady, preflight.IDControlPlaneHealth,
		preflight.IDPDBsBlockingDrain, preflight.IDProtectedPods)
	require.NoError(t, err)
	require.Equal(t, preflight.Failed, rep.Verdict)
	require.Equal(t, []string{preflight.IDNodesReady}, rep.Failed)

	nodes, _ := rep.Result(preflight.IDNodesReady)
	require.Contains(t, nodes.Message, f.notReady+" (NotReady)")
	require.Contains(t, nodes.Message, f.gone+" (not found)")
	cph, _ := rep.Result(preflight.IDControlPlaneHealth)
	require.Equal(t, preflight.Pass, cph.Status, cph.Message)
	pdbs, _ := rep.Result(preflight.IDPDBsBlockingDrain)
	require.Equal(t, preflight.Warn, pdbs.Status)
	require.Contains(t, pdbs.Message, f.ns+"/db-frozen")
	pods, _ := rep.Result(preflight.IDProtectedPods)
	require.Equal(t, preflight.Warn, pods.Status)
	require.Contains(t, pods.Message, f.ns+"/train-0 on "+f.notReady+" until 2026-11-27T08:00:00Z")
}
