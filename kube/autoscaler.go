package kube

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// TaintBluePool is the taint FreezeBlueNode puts on a blue pool's nodes so
// the Kubernetes cluster autoscaler does not grow the blue pool during a
// blue/green upgrade (SPEC §7, §10).
//
// The cluster autoscaler does not read a Compute Engine autoscaler's range
// (molt pins that too, for the Compute Engine autoscaler); it decides a
// scale-up by fitting pending pods onto a template node of each node
// group, a copy of one of the group's Ready, schedulable Nodes, cached
// until another such Node appears. The copy keeps the Node's taints except
// the autoscaler's own, the node-condition taints
// (node.kubernetes.io/unschedulable among them: a cordon is invisible to
// it) and the ignore-taint / startup-taint / status-taint prefixes. A
// NoSchedule taint under molt's own key therefore stays in the template,
// and a pod that does not tolerate it does not fit on a new blue node, so
// blue is not picked. The taint must be there while blue is still
// schedulable (before the cordon), for the template to be copied with it.
const TaintBluePool = "molt.dev/blue-pool"

// FreezeBlueNode marks a blue pool's node for the Kubernetes cluster
// autoscaler: AnnotationScaleDownDisabled (the node is not removed; set
// with AnnotationScaleDownDisabledByMolt when absent, as Cordon does) and
// TaintBluePool with effect NoSchedule (its node group is not grown). It
// is idempotent.
func (c *Client) FreezeBlueNode(ctx context.Context, node string) error {
	return c.updateNode(ctx, node, "freeze blue node", func(n *corev1.Node) bool {
		changed := false
		if _, ok := n.Annotations[AnnotationScaleDownDisabled]; !ok {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[AnnotationScaleDownDisabled] = "true"
			n.Annotations[AnnotationScaleDownDisabledByMolt] = "true"
			changed = true
		}
		if !slices.ContainsFunc(n.Spec.Taints, isBlueTaint) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintBluePool, Value: "true", Effect: corev1.TaintEffectNoSchedule})
			changed = true
		}
		return changed
	})
}

// ThawBlueNode undoes FreezeBlueNode: it removes TaintBluePool, and the
// scale-down annotation if, and only if, molt set it. It is idempotent.
func (c *Client) ThawBlueNode(ctx context.Context, node string) error {
	return c.updateNode(ctx, node, "thaw blue node", func(n *corev1.Node) bool {
		changed := false
		if slices.ContainsFunc(n.Spec.Taints, isBlueTaint) {
			n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, isBlueTaint)
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

func isBlueTaint(t corev1.Taint) bool { return t.Key == TaintBluePool }
