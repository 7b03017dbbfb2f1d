package kube_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	// The API server's node registration labels each Node with its hostname.
	require.Equal(t, kube.NodeInfo{Name: a, NodeState: kube.NodeState{Ready: true, KubeletVersion: "v1.34.4"},
		Labels: map[string]string{"kubernetes.io/hostname": a}}, byName[a])
	require.Equal(t, kube.NodeInfo{Name: b, NodeState: kube.NodeState{KubeletVersion: "v1.33.13", Unschedulable: true},
		Labels: map[string]string{"kubernetes.io/hostname": b}}, byName[b])

	require.NoError(t, c.LabelNode(ctx, a, map[string]string{"node-role.kubernetes.io/worker": "", "x": "y"}))
	n, err := cp.Clientset.CoreV1().Nodes().Get(ctx, a, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "", n.Labels["node-role.kubernetes.io/worker"])
	require.Contains(t, n.Labels, "node-role.kubernetes.io/worker")
	require.Equal(t, "y", n.Labels["x"])
	require.Equal(t, a, n.Labels["kubernetes.io/hostname"], "other labels stay")

	require.ErrorIs(t, c.LabelNode(ctx, kubetest.UniqueName("absent"), map[string]string{"x": "y"}), kube.ErrNodeNotFound)
}

// TestWaitNodeReadyWaitsThroughAnUnreachableAPIServer: the API server is
// reached through a load balancer that goes away while the node upgrades
// (the node may be the load balancer's host). Connection refused is waited
// through; the wait ends once the API answers and the node is Ready.
func TestWaitNodeReadyWaitsThroughAnUnreachableAPIServer(t *testing.T) {
	cp := kubetest.Shared(t)
	cfg, fc := testConfig(t, t0)
	var down atomic.Bool
	var refused atomic.Int32
	var d net.Dialer
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if down.Load() {
			refused.Add(1)
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return d.DialContext(ctx, network, addr)
	}
	c, err := kube.NewFromKubeconfig(cfg, cp.Kubeconfig, kube.WithDial(dial))
	require.NoError(t, err)
	node := kubetest.UniqueName("lb-away")
	cp.CreateNode(t, node, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.34.4"})

	down.Store(true)
	done := make(chan error, 1)
	go func() { done <- c.WaitNodeReady(context.Background(), node, "v1.34.4") }()
	for range 3 {
		eventually(t, func() bool { return fc.HasWaiters() || len(done) > 0 }, "WaitNodeReady stalled")
		require.Empty(t, done, "returned while the API server was unreachable")
		fc.Step(cfg.PollInterval)
	}
	require.Positive(t, refused.Load())

	down.Store(false)
	eventually(t, func() bool {
		if len(done) > 0 {
			return true
		}
		if fc.HasWaiters() {
			fc.Step(cfg.PollInterval)
		}
		return false
	}, "WaitNodeReady did not return once the API server answered")
	require.NoError(t, <-done)
}

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{fmt.Errorf("%w: get node x: %w", kube.ErrAPI, &net.OpError{Op: "read", Err: syscall.ECONNRESET}), true},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewInternalError(errors.New("etcd")), true},
		{apierrors.NewForbidden(gr, "x", errors.New("rbac")), false},
		{apierrors.NewUnauthorized("token"), false},
		{apierrors.NewBadRequest("bad"), false},
		{context.Canceled, false},
		{fmt.Errorf("get: %w", context.DeadlineExceeded), false},
		{nil, false},
	} {
		require.Equal(t, tc.want, kube.Transient(tc.err), "%v", tc.err)
	}
}
