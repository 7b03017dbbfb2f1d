package kube_test

import (
	"context"
	"testing"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestSetLoadBalancerIngress(t *testing.T) {
	cp := kubetest.Shared(t)
	ctx := context.Background()
	cfg, _ := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	ns := cp.Namespace(t)
	create := func(name string, typ corev1.ServiceType) {
		_, err := cp.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	create("web", corev1.ServiceTypeLoadBalancer)
	require.NoError(t, c.SetLoadBalancerIngress(ctx, ns, "web", []string{"10.77.0.20"}))
	svc, err := cp.Clientset.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, svc.Status.LoadBalancer.Ingress, 1)
	require.Equal(t, "10.77.0.20", svc.Status.LoadBalancer.Ingress[0].IP)
	require.NotNil(t, svc.Status.LoadBalancer.Ingress[0].IPMode)
	require.Equal(t, corev1.LoadBalancerIPModeProxy, *svc.Status.LoadBalancer.Ingress[0].IPMode, "kube-proxy leaves the balancer's address alone")
	rv := svc.ResourceVersion
	require.NoError(t, c.SetLoadBalancerIngress(ctx, ns, "web", []string{"10.77.0.20"}))
	svc, err = cp.Clientset.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, rv, svc.ResourceVersion, "the same addresses again write nothing")

	create("internal", corev1.ServiceTypeClusterIP)
	require.ErrorContains(t, c.SetLoadBalancerIngress(ctx, ns, "internal", []string{"10.77.0.20"}), "not LoadBalancer")

	ip, err := c.ServiceClusterIP(ctx, ns, "internal")
	require.NoError(t, err)
	got, err := cp.Clientset.CoreV1().Services(ns).Get(ctx, "internal", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, ip)
	require.Equal(t, got.Spec.ClusterIP, ip)
	_, err = c.ServiceClusterIP(ctx, ns, "absent")
	require.ErrorIs(t, err, kube.ErrAPI)
}
