package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWaitNodeReady(t *testing.T) {
	cp := kubetest.Shared(t)
	cfg, fc := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	node := kubetest.UniqueName("ready")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: false, KubeletVersion: "v1.33.6"})

	done := make(chan error, 1)
	go func() { done <- c.WaitNodeReady(context.Background(), node, "v1.34.4") }()

	// blockedAgain steps the fake clock past one poll and waits until the
	// waiter has re-read the node and blocked again (or returned).
	blockedAgain := func() {
		eventually(t, fc.HasWaiters, "WaitNodeReady never blocked on the clock")
		fc.Step(cfg.PollInterval)
		eventually(t, func() bool { return fc.HasWaiters() || len(done) > 0 }, "WaitNodeReady stalled")
	}

	// Ready, but the kubelet still runs the old version: keep waiting.
	blockedAgain()
	cp.SetNodeStatus(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})
	blockedAgain()
	require.Empty(t, done, "returned before the kubelet version changed")

	// New version but NotReady (kubelet restarting): keep waiting.
	cp.SetNodeStatus(t, node, kubetest.NodeStatus{Ready: false, KubeletVersion: "v1.34.4"})
	blockedAgain()
	require.Empty(t, done, "returned while NotReady")

	cp.SetNodeStatus(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.34.4"})
	blockedAgain()
	eventually(t, func() bool { return len(done) > 0 }, "WaitNodeReady did not return")
	require.NoError(t, <-done)
}

func TestWaitNodeReadyCancel(t *testing.T) {
	cp := kubetest.Shared(t)
	cfg, fc := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	node := kubetest.UniqueName("cancel")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: false, KubeletVersion: "v1.33.6"})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.WaitNodeReady(ctx, node, "v1.34.4") }()
	eventually(t, fc.HasWaiters, "WaitNodeReady never blocked on the clock")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(30 * time.Second):
		t.Fatal("WaitNodeReady ignored cancellation")
	}
}

func TestListNodesAndLabelNode(t *testing.T) {
	cp := kubetest.Shared(t)
	cfg, _ := testConfig(t, t0)
	c := kube.New(cfg, cp.Clientset)
	ctx := context.Background()
	a, b := kubetest.UniqueName("list"), kubetest.UniqueName("list")
	cp.CreateNode(t, b, kubetest.NodeStatus{Ready: false, KubeletVersion: "v1.33.13"})
	cp.CreateNode(t, a, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.34.4"})
	require.NoError(t, c.Cordon(ctx, b))

	nodes, err := c.ListNodes(ctx)
	require.NoError(t, err)
	byName := map[string]kube.NodeInfo{}
	for i, n := range nodes {
		byName[n.Name] = n
		if i > 0 {
			require.Less(t, nodes[i-1].Name, n.Name, "sorted by name")
		}
	}
	require.Equal(t, kube.NodeInfo{Name: a, NodeState: kube.NodeState{Ready: true, KubeletVersion: "v1.34.4"}}, byName[a])
	require.Equal(t, kube.NodeInfo{Name: b, NodeState: kube.NodeState{KubeletVersion: "v1.33.13", Unschedulable: true}}, byName[b])

	require.NoError(t, c.LabelNode(ctx, a, map[string]string{"node-role.kubernetes.io/worker": "", "x": "y"}))
	n, err := cp.Clientset.CoreV1().Nodes().Get(ctx, a, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "", n.Labels["node-role.kubernetes.io/worker"])
	require.Contains(t, n.Labels, "node-role.kubernetes.io/worker")
	require.Equal(t, "y", n.Labels["x"])
	require.Equal(t, a, n.Labels["kubernetes.io/hostname"], "other labels stay")

	require.ErrorIs(t, c.LabelNode(ctx, kubetest.UniqueName("absent"), map[string]string{"x": "y"}), kube.ErrNodeNotFound)
}
