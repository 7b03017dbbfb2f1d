package kube

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetLoadBalancerIngress records ips as the addresses a LoadBalancer
// Service is served at (status.loadBalancer.ingress), as a load-balancer
// controller does once its balancer is in place, with ipMode Proxy: the
// balancer at those addresses proxies to the nodes itself, so kube-proxy
// must not capture traffic to them (with the default, VIP, it does, on the
// balancer's own host too, and the balancer is bypassed). It changes
// nothing when the Service already lists exactly those addresses.
func (c *Client) SetLoadBalancerIngress(ctx context.Context, namespace, name string, ips []string) error {
	svc, err := c.cs.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return apiErr("get service "+namespace+"/"+name, err)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return fmt.Errorf("kube: service %s/%s is %s, not LoadBalancer", namespace, name, svc.Spec.Type)
	}
	var have []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IPMode == nil || *in.IPMode != corev1.LoadBalancerIPModeProxy {
			have = append(have, "") // rewrite: not in Proxy mode
			continue
		}
		have = append(have, in.IP)
	}
	if slices.Equal(have, ips) {
		return nil
	}
	svc.Status.LoadBalancer.Ingress = nil
	for _, ip := range ips {
		mode := corev1.LoadBalancerIPModeProxy
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip, IPMode: &mode})
	}
	if _, err := c.cs.CoreV1().Services(namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		return apiErr("update status of service "+namespace+"/"+name, err)
	}
	return nil
}

// ServiceClusterIP returns a Service's spec.clusterIP ("None" for a
// headless Service).
func (c *Client) ServiceClusterIP(ctx context.Context, namespace, name string) (string, error) {
	svc, err := c.cs.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", apiErr("get service "+namespace+"/"+name, err)
	}
	return svc.Spec.ClusterIP, nil
}
