package kube_test

import (
	"context"
	"testing"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStaticPodsReady: a node serves once every static pod it runs (its
// mirror pods) is Ready; a pod that is not a static pod's mirror, or runs
// on another node, does not hold it. WaitStaticPodsReady waits until then.
func TestStaticPodsReady(t *testing.T) {
	cp := kubetest.Shared(t)
	cfg, fc := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	ctx := context.Background()
	ns := cp.Namespace(t)
	node, other := kubetest.UniqueName("lb"), kubetest.UniqueName("other")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.34.4"})
	cp.CreateNode(t, other, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.34.4"})
	require.NoError(t, c.StaticPodsReady(ctx, node), "a node without static pods serves")

	pod := func(name, on string, mirror bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: on}}
		if mirror {
			p.Annotations = map[string]string{kube.AnnotationMirrorPod: "hash"}
		}
		return p
	}
	setReady := func(name string, ready bool) {
		p, err := cp.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				p.Status.Conditions[i].Status = st
			}
		}
		_, err = cp.Clientset.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	cp.RunPod(t, pod("haproxy-"+node, node, true))
	cp.RunPod(t, pod("app", node, false))
	cp.RunPod(t, pod("haproxy-"+other, other, true))
	setReady("app", false)
	setReady("haproxy-"+other, false)
	require.NoError(t, c.StaticPodsReady(ctx, node), "an unready pod that is no static pod, or one on another node, does not count")

	setReady("haproxy-"+node, false)
	err := c.StaticPodsReady(ctx, node)
	require.ErrorContains(t, err, "static pods on "+node+" not Ready: "+ns+"/haproxy-"+node+" (Running)")

	done := make(chan error, 1)
	go func() { done <- c.WaitStaticPodsReady(ctx, node) }()
	eventually(t, fc.HasWaiters, "WaitStaticPodsReady never blocked on the clock")
	require.Empty(t, done, "returned while the static pod is not Ready")
	setReady("haproxy-"+node, true)
	fc.Step(cfg.PollInterval)
	eventually(t, func() bool { return len(done) > 0 }, "WaitStaticPodsReady did not return")
	require.NoError(t, <-done)
}
