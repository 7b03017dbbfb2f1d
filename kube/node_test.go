package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
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
