package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// conflictRetries bounds read-modify-write attempts on a Node. Conflicts come
// from the kubelet's status heartbeats touching the same object; they never
// persist, so a few immediate retries suffice and no backoff (no real-time
// sleep) is needed.
const conflictRetries = 5

// Cordon marks the node unschedulable and protects it from autoscaler
// scale-down (SPEC §6). It is idempotent. When the scale-down annotation is
// absent molt sets it together with AnnotationScaleDownDisabledByMolt, so that
// Uncordon later removes only what molt added.
func (c *Client) Cordon(ctx context.Context, node string) error {
	return c.updateNode(ctx, node, "cordon", func(n *corev1.Node) bool {
		changed := false
		if !n.Spec.Unschedulable {
			n.Spec.Unschedulable = true
			changed = true
		}
		if _, ok := n.Annotations[AnnotationScaleDownDisabled]; !ok {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[AnnotationScaleDownDisabled] = "true"
			n.Annotations[AnnotationScaleDownDisabledByMolt] = "true"
			changed = true
		}
		return changed
	})
}

// Uncordon makes the node schedulable again and removes the scale-down
// annotation if, and only if, molt set it. It is idempotent.
func (c *Client) Uncordon(ctx context.Context, node string) error {
	return c.updateNode(ctx, node, "uncordon", func(n *corev1.Node) bool {
		changed := false
		if n.Spec.Unschedulable {
			n.Spec.Unschedulable = false
			changed = true
		}
		if _, ours := n.Annotations[AnnotationScaleDownDisabledByMolt]; ours {
			delete(n.Annotations, AnnotationScaleDownDisabled)
			delete(n.Annotations, AnnotationScaleDownDisabledByMolt)
			changed = true
		}
		return changed
	})
}

// updateNode reads the node, applies mutate and writes it back with the read
// resourceVersion (optimistic concurrency), retrying on conflict. mutate
// reports whether it changed anything; nothing is written otherwise.
func (c *Client) updateNode(ctx context.Context, node, op string, mutate func(*corev1.Node) bool) error {
	nodes := c.cs.CoreV1().Nodes()
	var err error
	for range conflictRetries {
		var n *corev1.Node
		n, err = nodes.Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: %s %s", ErrNodeNotFound, op, node)
		}
		if err != nil {
			return apiErr(op+" get node "+node, err)
		}
		if !mutate(n) {
			return nil
		}
		_, err = nodes.Update(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			c.cfg.Logger.Info("node updated", "op", op, "node", node)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return apiErr(op+" update node "+node, err)
		}
	}
	return apiErr(op+" update node "+node, err)
}
