package coordinator_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/kube"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/moltproject/molt/phases"
)

type kubeConnector struct{ log *slog.Logger }

func (k kubeConnector) Connect(cluster string, kubeconfig []byte) (coordinator.ClusterOps, error) {
	return coordinator.ConnectKube(cluster, kubeconfig, kube.DefaultConfig(), k.log)
}

// TestUpgradeAgainstRealAPIServer runs an upgrade whose node steps go
// through a real kube-apiserver: nodes are cordoned (with the autoscaler's
// scale-down-disabled annotation), drained, seen Ready at the new kubelet
// version (the simulated host reports it when its kubelet is upgraded) and
// uncordoned; preflight reads the same API server.
func TestUpgradeAgainstRealAPIServer(t *testing.T) {
	cp := kubetest.Start(t)
	nodes := []string{"cp-1", "worker-1", "worker-2"}
	for _, n := range nodes {
		cp.CreateNode(t, n, kubetest.NodeStatus{Ready: true, KubeletVersion: "v1.33.6"})
	}
	ns := cp.Namespace(t)
	cp.RunPod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: "worker-1", Containers: []corev1.Container{{Name: "web", Image: "web:1"}}}})

	log := testLogger(t)
	m := startMemberAt(t, "m1", t.TempDir(), true, nil, "", "127.0.0.1:0", nil, func(cfg *coordinator.Config) {
		cfg.Connector = kubeConnector{log: log}
	})
	tc := &testCluster{t: t, members: []*member{m}}
	tc.waitLeader()
	cl := m.client()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	spec := api.ClusterSpec{Kubeconfig: string(cp.Kubeconfig),
		Name: "real", Kind: api.ClusterStandalone, Version: "1.33.6",
		Pools: []api.Pool{
			{Name: "cp", Role: api.RoleControlPlane, Nodes: []api.Node{{Name: "cp-1"}}},
			{Name: "workers", Role: api.RoleWorker, Nodes: []api.Node{{Name: "worker-1"}, {Name: "worker-2"}}},
		}}
	put(t, cl, "/v1/clusters/real", spec)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The evicted pod has no kubelet to stop it: play the kubelet.
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			p, err := cp.Clientset.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
			if err == nil && p.DeletionTimestamp != nil {
				zero := int64(0)
				_ = cp.Clientset.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: &zero})
				return
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	var mu sync.Mutex
	cordoned := map[string]bool{}
	startAgentsWith(ctx, tc, "real", nodes, false, func(node string, op api.Operation) {
		if op.UpgradeBinary == nil || op.UpgradeBinary.Component != api.ComponentKubelet {
			return
		}
		// While the node is being upgraded it is cordoned and protected from
		// the autoscaler's scale-down.
		n, err := cp.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return
		}
		if n.Spec.Unschedulable && n.Annotations["cluster-autoscaler.kubernetes.io/scale-down-disabled"] == "true" {
			mu.Lock()
			cordoned[node] = true
			mu.Unlock()
		}
		// The restarted kubelet reports its new version.
		n.Status.NodeInfo.KubeletVersion = op.UpgradeBinary.Version
		_, _ = cp.Clientset.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	})
	waitAgents(t, tc, "real", len(nodes))

	var started api.PreflightRun
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/real/preflight", map[string]string{"version": "1.34.4"}, &started)
	require.NoError(t, err)
	var run coordinator.PreflightRun
	eventually(t, "preflight done", func() bool {
		run, err = m.c.Preflight("real", started.ID)
		return err == nil && run.State == "done"
	})
	require.False(t, run.Report.Blocked(), "%+v", run.Report.Results)

	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/real/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	eventually(t, "upgrade done", func() bool {
		u, err := m.c.Upgrade("real")
		return err == nil && u.State == phases.UpgradeDone
	})
	for _, name := range nodes {
		n, err := cp.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "v1.34.4", n.Status.NodeInfo.KubeletVersion)
		require.False(t, n.Spec.Unschedulable, "%s uncordoned", name)
		require.NotContains(t, n.Annotations, "cluster-autoscaler.kubernetes.io/scale-down-disabled")
		mu.Lock()
		require.True(t, cordoned[name], "%s was cordoned and protected during its upgrade", name)
		mu.Unlock()
	}
	_, err = cp.Clientset.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
	require.Error(t, err, "the pod on worker-1 was evicted by the drain")
	c, err := m.c.Cluster("real")
	require.NoError(t, err)
	require.Equal(t, "1.34.4", c.Status.Version)
	// The add-ons step applied the target release's add-ons.
	require.Equal(t, "1.34.4", c.Status.AppliedManifestsVersion)
	for _, name := range []string{"molt-test-kube-proxy", "molt-test-coredns"} {
		cm, err := cp.Clientset.CoreV1().ConfigMaps("kube-system").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, name)
		require.Equal(t, map[string]string{"version": "1.34.4"}, cm.Data, name)
		require.Equal(t, "molt", cm.ManagedFields[0].Manager, name)
	}
}
