package kubetest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

var nameSeq atomic.Int64

// UniqueName returns prefix-N, distinct within the test binary; use it for
// cluster-scoped objects such as Nodes that tests must not share.
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", strings.ToLower(prefix), nameSeq.Add(1))
}

// Namespace creates a fresh namespace for the calling test. Namespaces are
// not deleted: no namespace controller runs, and the control plane is
// disposable.
func (cp *ControlPlane) Namespace(t testing.TB) string {
	t.Helper()
	ns, err := cp.Clientset.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: create namespace: %v", err)
	}
	return ns.Name
}

// NodeStatus is the part of a Node's status a kubelet would report.
type NodeStatus struct {
	Ready          bool
	KubeletVersion string
}

// CreateNode creates a Node (there is no kubelet to register it) and sets
// its status.
func (cp *ControlPlane) CreateNode(t testing.TB, name string, st NodeStatus) *corev1.Node {
	t.Helper()
	_, err := cp.Clientset.CoreV1().Nodes().Create(context.Background(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: create node %s: %v", name, err)
	}
	return cp.SetNodeStatus(t, name, st)
}

// SetNodeStatus writes the node's Ready condition and kubelet version
// through the status subresource, as a kubelet heartbeat would.
func (cp *ControlPlane) SetNodeStatus(t testing.TB, name string, st NodeStatus) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	n, err := cp.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kubetest: get node %s: %v", name, err)
	}
	ready := corev1.ConditionFalse
	if st.Ready {
		ready = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: ready, Reason: "Kubetest",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	n.Status.NodeInfo.KubeletVersion = st.KubeletVersion
	n, err = cp.Clientset.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("kubetest: update node status %s: %v", name, err)
	}
	return n
}

// RunPod creates pod (which must name its node in spec.nodeName) and marks
// it Running and Ready, as a kubelet would; PodDisruptionBudgets only count
// ready pods, and the Eviction API skips budgets for Pending pods. A
// status.startTime set by the caller is kept (protection age tests);
// otherwise it is the creation time. Containers default to one "app".
func (cp *ControlPlane) RunPod(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if len(pod.Spec.Containers) == 0 {
		pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}
	}
	startTime := pod.Status.StartTime
	created, err := cp.Clientset.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubetest: create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	if startTime == nil {
		startTime = &created.CreationTimestamp
	}
	created.Status = corev1.PodStatus{
		Phase:     corev1.PodRunning,
		StartTime: startTime,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		},
	}
	updated, err := cp.Clientset.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("kubetest: set pod status %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return updated
}

// ForceDelete deletes a pod with grace period 0, as a kubelet does once the
// containers are gone. A pod with finalizers stays until they are removed.
func (cp *ControlPlane) ForceDelete(t testing.TB, namespace, name string) {
	t.Helper()
	zero := int64(0)
	err := cp.Clientset.CoreV1().Pods(namespace).Delete(context.Background(), name,
		metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("kubetest: force delete %s/%s: %v", namespace, name, err)
	}
}

// ReapTerminating plays the kubelet of node until the test ends: every pod
// on the node that gets a deletionTimestamp is force-deleted at once. Pods
// with finalizers stay Terminating, the "stuck" case. It returns after the
// watch is established, so no deletion is missed.
func (cp *ControlPlane) ReapTerminating(t testing.TB, node string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cp.Clientset.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		cancel()
		t.Fatalf("kubetest: watch pods on %s: %v", node, err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	go func() {
		defer close(done)
		zero := int64(0)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted || pod.DeletionTimestamp == nil || len(pod.Finalizers) > 0 {
				continue
			}
			uid := pod.UID
			// Errors are expected races (already gone); the test observes
			// the outcome through the API, not through this goroutine.
			_ = cp.Clientset.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
				GracePeriodSeconds: &zero,
				Preconditions:      &metav1.Preconditions{UID: &uid},
			})
		}
	}()
}
