package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// PodLogs returns the current log of the pod's container ("" when the pod
// has one container). The API server fetches it from the pod's kubelet, so
// it also proves the kubelet accepts the API server's client identity.
func (c *Client) PodLogs(ctx context.Context, namespace, pod, container string) ([]byte, error) {
	b, err := c.cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return nil, apiErr("logs of "+namespace+"/"+pod, err)
	}
	return b, nil
}
