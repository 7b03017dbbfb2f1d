package kube_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WatchPods reports a pod's life as its clients feel it, against a real
// API server: there already (added), Ready, terminating once its deletion
// begins (a kubelet would now send SIGTERM), not Ready, deleted.
func TestWatchPodsReportsEachChangeOfAPodsLife(t *testing.T) {
	cp := kubetest.Shared(t)
	cfg, _ := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	node := kubetest.UniqueName("watch")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.34.4"})
	ns := cp.Namespace(t)
	cp.RunPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before"}, Spec: corev1.PodSpec{NodeName: node}})

	var mu sync.Mutex
	var seen []string
	require.NoError(t, c.WatchPods(ctx, ns, func(ch kube.PodChange) {
		mu.Lock()
		defer mu.Unlock()
		if ch.At.IsZero() {
			ch.What += " (no time)"
		}
		seen = append(seen, ch.Name+" on "+ch.Node+" "+ch.What)
	}))
	waitSeen := func(want ...string) {
		t.Helper()
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) >= len(want)
		}, 30*time.Second, 10*time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, want, seen)
		seen = nil
	}
	waitSeen("before on " + node + " added")

	cp.RunPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: corev1.PodSpec{NodeName: node}})
	waitSeen("web on "+node+" added", "web on "+node+" ready")

	// No kubelet here: the pod stays terminating until force-deleted.
	require.NoError(t, cp.Clientset.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
	waitSeen("web on " + node + " terminating")
	p, err := cp.Clientset.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	_, err = cp.Clientset.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitSeen("web on " + node + " not ready")
	cp.ForceDelete(t, ns, "web")
	waitSeen("web on " + node + " deleted")
}
