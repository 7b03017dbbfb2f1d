package kube_test

import (
	"context"
	"testing"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCordonUncordon(t *testing.T) {
	cp := kubetest.Shared(t)
	ctx := context.Background()
	cases := []struct {
		name         string
		preexisting  map[string]string // annotations an operator set before
		wantAfterOff map[string]string // scale-down annotation after Uncordon
	}{
		{name: "molt sets and removes", preexisting: nil, wantAfterOff: nil},
		{
			name:         "operator annotation survives",
			preexisting:  map[string]string{kube.AnnotationScaleDownDisabled: "true"},
			wantAfterOff: map[string]string{kube.AnnotationScaleDownDisabled: "true"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := testConfig(t, t0)
			c := kube.New(cfg, cp.Clientset)
			node := kubetest.UniqueName("cordon")
			cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})
			if tc.preexisting != nil {
				n, err := cp.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				require.NoError(t, err)
				n.Annotations = tc.preexisting
				_, err = cp.Clientset.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
				require.NoError(t, err)
			}

			for range 2 { // idempotent
				require.NoError(t, c.Cordon(ctx, node))
				n, err := cp.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				require.NoError(t, err)
				require.True(t, n.Spec.Unschedulable)
				require.Equal(t, "true", n.Annotations[kube.AnnotationScaleDownDisabled])
				st, err := c.NodeState(ctx, node)
				require.NoError(t, err)
				require.Equal(t, kube.NodeState{Ready: true, KubeletVersion: "v1.33.6", Unschedulable: true}, st)
			}

			for range 2 {
				require.NoError(t, c.Uncordon(ctx, node))
				n, err := cp.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				require.NoError(t, err)
				require.False(t, n.Spec.Unschedulable)
				got := map[string]string{}
				for k, v := range n.Annotations {
					if k == kube.AnnotationScaleDownDisabled || k == kube.AnnotationScaleDownDisabledByMolt {
						got[k] = v
					}
				}
				if tc.wantAfterOff == nil {
					require.Empty(t, got)
				} else {
					require.Equal(t, tc.wantAfterOff, got)
				}
			}
		})
	}
}

func TestCordonMissingNode(t *testing.T) {
	cp := kubetest.Shared(t)
	cfg, _ := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	ctx := context.Background()
	require.ErrorIs(t, c.Cordon(ctx, "no-such-node"), kube.ErrNodeNotFound)
	require.ErrorIs(t, c.Uncordon(ctx, "no-such-node"), kube.ErrNodeNotFound)
	_, err := c.NodeState(ctx, "no-such-node")
	require.ErrorIs(t, err, kube.ErrNodeNotFound)
}

func TestNewFromKubeconfig(t *testing.T) {
	cp := kubetest.Shared(t)
	cfg, _ := testConfig(t, t0)
	c, err := kube.NewFromKubeconfig(cfg, cp.Kubeconfig)
	require.NoError(t, err)
	node := kubetest.UniqueName("kubeconfig")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: false, KubeletVersion: "v1.34.4"})
	st, err := c.NodeState(context.Background(), node)
	require.NoError(t, err)
	require.Equal(t, kube.NodeState{KubeletVersion: "v1.34.4"}, st)

	_, err = kube.NewFromKubeconfig(cfg, []byte("not: [a kubeconfig"))
	require.ErrorIs(t, err, kube.ErrConfig)
}
