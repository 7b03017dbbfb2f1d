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

func TestListPods(t *testing.T) {
	cp := kubetest.Shared(t)
	cfg, _ := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	ctx := context.Background()
	node := kubetest.UniqueName("pods")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.34.4"})
	ns := cp.Namespace(t)

	cp.RunPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-b", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{
			{Name: "main", Image: "example/web:2"}, {Name: "side", Image: "example/side:1"},
		}},
	})
	cp.RunPod(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-a", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{kube.AnnotationMirrorPod: "hash"}},
		Spec: corev1.PodSpec{NodeName: node},
	})
	_, err := cp.Clientset.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Labels: map[string]string{"app": "db"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "example/db:1"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	pods, err := c.ListPods(ctx, ns, "app=web")
	require.NoError(t, err)
	require.Len(t, pods, 2)
	a, b := pods[0], pods[1]
	require.Equal(t, "web-a", a.Name, "sorted by name")
	require.True(t, a.Mirror)
	require.Equal(t, []kube.ContainerInfo{{Name: "app", Image: "registry.invalid/app:1"}}, a.Containers)
	require.Equal(t, "web-b", b.Name)
	require.Equal(t, ns, b.Namespace)
	require.Equal(t, node, b.NodeName)
	require.Equal(t, "Running", b.Phase)
	require.True(t, b.Ready)
	require.False(t, b.Mirror)
	require.Equal(t, map[string]string{"app": "web"}, b.Labels)
	require.Equal(t, []kube.ContainerInfo{{Name: "main", Image: "example/web:2"}, {Name: "side", Image: "example/side:1"}}, b.Containers)

	all, err := c.ListPods(ctx, ns, "")
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, "db", all[0].Name)
	require.False(t, all[0].Ready)
	require.Equal(t, "Pending", all[0].Phase)
	require.Empty(t, all[0].NodeName)

	_, err = c.ListPods(ctx, ns, "app in (")
	require.ErrorIs(t, err, kube.ErrAPI)
}

// Without a kubelet there are no logs; the error is an ErrAPI. The lab
// suite reads real logs through real kubelets.
func TestPodLogsWithoutKubeletIsAnAPIError(t *testing.T) {
	cp := kubetest.Shared(t)
	cfg, _ := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	node := kubetest.UniqueName("logs")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.34.4"})
	ns := cp.Namespace(t)
	cp.RunPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: corev1.PodSpec{NodeName: node}})
	_, err := c.PodLogs(context.Background(), ns, "p", "")
	require.ErrorIs(t, err, kube.ErrAPI)
}

func TestServerVersion(t *testing.T) {
	cp := kubetest.Shared(t)
	cfg, _ := testConfig(t, t0)
	v, err := kube.New(cfg, cp.Clientset).ServerVersion(context.Background())
	require.NoError(t, err)
	require.Regexp(t, `^v1\.\d+\.\d+`, v)
}
