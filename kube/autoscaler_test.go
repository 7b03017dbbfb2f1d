package kube_test

import (
	"context"
	"strings"
	"testing"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFreezeThawBlueNode: FreezeBlueNode gives a schedulable node the
// cluster autoscaler's scale-down-disabled annotation and molt's
// NoSchedule blue-pool taint, once however often it is called, keeping
// the node's other taints and leaving it schedulable; ThawBlueNode takes
// both away again, except an annotation the operator had set. On the real
// API server.
func TestFreezeThawBlueNode(t *testing.T) {
	cp := kubetest.Shared(t)
	ctx := context.Background()
	operatorTaint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name        string
		preexisting map[string]string // annotations an operator set before
		wantAfter   map[string]string // scale-down annotations after the thaw
	}{
		{name: "molt sets and removes"},
		{name: "operator annotation survives",
			preexisting: map[string]string{kube.AnnotationScaleDownDisabled: "true"},
			wantAfter:   map[string]string{kube.AnnotationScaleDownDisabled: "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := testConfig(t, t0)
			c := kube.New(cfg, cp.Clientset)
			node := kubetest.UniqueName("blue")
			cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})
			n, err := cp.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			require.NoError(t, err)
			n.Annotations, n.Spec.Taints = tc.preexisting, []corev1.Taint{operatorTaint}
			_, err = cp.Clientset.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			require.NoError(t, err)

			for range 2 { // idempotent
				require.NoError(t, c.FreezeBlueNode(ctx, node))
				n := getNode(t, cp, node)
				require.False(t, n.Spec.Unschedulable, "a freeze is no cordon")
				require.Equal(t, "true", n.Annotations[kube.AnnotationScaleDownDisabled])
				require.Equal(t, []corev1.Taint{operatorTaint, {Key: kube.TaintBluePool, Value: "true", Effect: corev1.TaintEffectNoSchedule}}, n.Spec.Taints)
			}
			// What the cluster autoscaler's template keeps: not its own
			// taints, the node-condition ones (node.kubernetes.io/...) or
			// the ignore-/startup-/status-taint prefixes; and NoSchedule,
			// which its scheduling simulation checks (PreferNoSchedule it
			// would not).
			for _, p := range []string{"node.kubernetes.io/", "ignore-taint.cluster-autoscaler.kubernetes.io/",
				"startup-taint.cluster-autoscaler.kubernetes.io/", "status-taint.cluster-autoscaler.kubernetes.io/"} {
				require.False(t, strings.HasPrefix(kube.TaintBluePool, p))
			}
			blue := getNode(t, cp, node).Spec.Taints[1]
			require.False(t, (&corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}).ToleratesTaint(&blue),
				"a pod that does not tolerate the blue taint does not fit on blue's template")

			// The rollback order: blue uncordoned, then thawed.
			require.NoError(t, c.Cordon(ctx, node))
			require.NoError(t, c.Uncordon(ctx, node))
			for range 2 {
				require.NoError(t, c.ThawBlueNode(ctx, node))
				n := getNode(t, cp, node)
				require.Equal(t, []corev1.Taint{operatorTaint}, n.Spec.Taints)
				got := map[string]string{}
				for k, v := range n.Annotations {
					if k == kube.AnnotationScaleDownDisabled || k == kube.AnnotationScaleDownDisabledByMolt {
						got[k] = v
					}
				}
				if tc.wantAfter == nil {
					require.Empty(t, got)
				} else {
					require.Equal(t, tc.wantAfter, got)
				}
			}
		})
	}

	cfg, _ := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	require.ErrorIs(t, c.FreezeBlueNode(ctx, "no-such-node"), kube.ErrNodeNotFound)
	require.ErrorIs(t, c.ThawBlueNode(ctx, "no-such-node"), kube.ErrNodeNotFound)
}

func getNode(t *testing.T, cp *kubetest.ControlPlane, name string) *corev1.Node {
	t.Helper()
	n, err := cp.Clientset.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}
