package coordinator_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
)

// TestRegistrationChecksObservedVersion: a cluster registered as 1.34.4
// whose Nodes report kubelet 1.33.6 is refused with the observed versions
// in the problem, and nothing is stored; asked to adopt, it is registered
// at 1.33.6, and its status says so.
func TestRegistrationChecksObservedVersion(t *testing.T) {
	ops := newFakeOps()
	ops.kubelets = map[string]string{}
	spec := clusterSpec("lab", "1.34.4")
	for _, p := range spec.Pools {
		for _, n := range p.Nodes {
			ops.kubelets[n.Name] = "v1.33.6"
		}
	}
	tc := newTestCluster(t, 1, ops)
	cl := tc.waitLeader().client()
	ctx := context.Background()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))

	_, err := cl.Do(ctx, http.MethodPut, "/v1/clusters/lab", spec, nil)
	require.Equal(t, phases.RuleObservedVersion, problemRule(err), "%v", err)
	require.Equal(t, http.StatusUnprocessableEntity, problemStatus(err), "%v", err)
	require.ErrorContains(t, err, "stated 1.34.4, but the nodes run 1.33.6")
	require.ErrorContains(t, err, "cp-1: 1.33.6")
	_, err = cl.Do(ctx, http.MethodGet, "/v1/clusters/lab", nil, nil)
	require.Equal(t, http.StatusNotFound, problemStatus(err), "a refusal stores nothing: %v", err)

	spec.Adopt = true
	var c api.Cluster
	_, err = cl.Do(ctx, http.MethodPut, "/v1/clusters/lab", spec, &c)
	require.NoError(t, err)
	require.Equal(t, "1.33.6", c.Spec.Version)
	require.Equal(t, "1.33.6", c.Status.Version)
	require.Empty(t, c.Status.RecordedVersion)
}

// TestDriftBlocksAutomaticUpgrade: agents' beats are observed versions.
// Beats that change nothing write no entry; a kubelet replaced by hand on
// one node is drift — on the node, in the metric's view, and as a block
// naming the node in upgrade-status, holding the automatic upgrade back —
// until the node agrees with the record again, when the upgrade starts.
func TestDriftBlocksAutomaticUpgrade(t *testing.T) {
	// The default scheduler interval (a minute): the pass after the node
	// is put back comes from the drift's change, not from the interval.
	tc := newTestCluster(t, 1, newFakeOps())
	leader := tc.waitLeader()
	cl := leader.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, v := range []string{"1.33.6", "1.33.7"} {
		put(t, cl, "/v1/releases/"+v, release(v))
	}
	spec := clusterSpec("lab", "1.33.6")
	spec.Channel = "regular"
	spec.MaintenancePolicy = &api.MaintenancePolicy{}
	put(t, cl, "/v1/clusters/lab", spec)

	beat := func(ag *agentCred, node, kubelet string) {
		t.Helper()
		require.NoError(t, ag.client(leader.addr).Heartbeat(ctx, api.AgentHealth{Cluster: "lab", Node: node,
			Kubelet: api.ComponentHealth{Healthy: true, Version: kubelet}, Containerd: api.ComponentHealth{Healthy: true, Version: "1.7.0"}}))
	}
	agents := map[string]*agentCred{}
	for _, node := range []string{"worker-1", "worker-2"} {
		ag, err := enrollAgent(ctx, cl, leader.addr, "lab", node)
		require.NoError(t, err)
		_, err = ag.client(leader.addr).Register(ctx, api.RegisterRequest{Cluster: "lab", Node: node})
		require.NoError(t, err)
		agents[node] = ag
		beat(ag, node, "v1.33.6")
	}
	c, err := leader.c.Cluster("lab")
	require.NoError(t, err)
	require.Equal(t, "1.33.6", c.Status.Version)
	require.NotNil(t, c.Status.Observed)
	require.Equal(t, "1.33.6", c.Status.Observed.Kubelet.Version)
	require.Equal(t, map[string]int{"1.33.6": 2}, c.Status.Observed.Kubelet.Nodes)
	require.False(t, c.Status.Observed.Kubelet.LastSeen.IsZero())
	for _, a := range c.Status.Agents {
		require.Empty(t, a.Drift, a.Node)
	}

	// Unchanged beats write nothing.
	idx := leader.c.Store().AppliedIndex()
	for range 10 {
		beat(agents["worker-1"], "worker-1", "v1.33.6")
	}
	require.Equal(t, idx, leader.c.Store().AppliedIndex(), "beats that change nothing write no entry")

	// worker-1's kubelet is replaced by hand: one entry, and drift.
	beat(agents["worker-1"], "worker-1", "v1.34.4")
	require.Equal(t, idx+1, leader.c.Store().AppliedIndex(), "a changed version is one entry")
	for range 5 {
		beat(agents["worker-1"], "worker-1", "v1.34.4")
	}
	require.Equal(t, idx+1, leader.c.Store().AppliedIndex(), "and only one")
	c, err = leader.c.Cluster("lab")
	require.NoError(t, err)
	require.Equal(t, "1.33.6", c.Status.Version, "the lowest observed")
	require.Equal(t, map[string]int{"1.33.6": 1, "1.34.4": 1}, c.Status.Observed.Kubelet.Nodes)
	drift := map[string]string{}
	for _, a := range c.Status.Agents {
		drift[a.Node] = a.Drift
	}
	require.Equal(t, map[string]string{"worker-1": "kubelet 1.34.4, recorded 1.33.6", "worker-2": ""}, drift)
	var metric []string
	for _, a := range leader.c.AgentsView() {
		if a.Drift {
			metric = append(metric, a.Node)
		}
	}
	require.Equal(t, []string{"worker-1"}, metric, "molt_node_version_drift")

	// A patch is due on the channel: drift holds it back, naming the node.
	_, err = cl.Do(ctx, http.MethodPut, "/v1/channels/regular", api.ChannelUpdate{AutoUpgradeTarget: "1.33.7"}, nil)
	require.NoError(t, err)
	st := upgradeStatus(t, ctx, cl, "lab")
	require.Equal(t, api.AutoBlockedByRule, st.State, st.Message)
	require.Equal(t, []api.UpgradeBlock{{Kind: api.BlockDrift, Name: "worker-1",
		Detail: "node worker-1 runs other versions than molt recorded: kubelet 1.34.4, recorded 1.33.6"}}, st.BlockedBy)
	_, err = getUpgrade(ctx, cl, "lab")
	require.Error(t, err, "nothing started")

	// A manual upgrade obeys the rules on what runs too: worker-1's 1.34
	// kubelet would be newer than 1.33.7's API server.
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.33.7", DryRun: true}, nil)
	require.Equal(t, phases.RuleKubeletSkew, problemRule(err), "%v", err)

	// Put back by hand: the block ends, and the upgrade starts.
	beat(agents["worker-1"], "worker-1", "v1.33.6")
	eventually(t, "the automatic upgrade started", func() bool {
		_, err := getUpgrade(ctx, cl, "lab")
		return err == nil
	})
}

// TestStaticPodImagesObserved: a control-plane node's beat carries the
// images of its running static pods (the kubelet's "<name>-<node>"); the
// record keeps them by name, written once per change, never for a pod of
// a DaemonSet or one that is not running; an image no recorded release
// names for the component is drift on the node.
func TestStaticPodImagesObserved(t *testing.T) {
	tc := newTestCluster(t, 1, newFakeOps())
	leader := tc.waitLeader()
	cl := leader.client()
	ctx := context.Background()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/clusters/lab", clusterSpec("lab", "1.33.6"))
	ag, err := enrollAgent(ctx, cl, leader.addr, "lab", "cp-1")
	require.NoError(t, err)
	_, err = ag.client(leader.addr).Register(ctx, api.RegisterRequest{Cluster: "lab", Node: "cp-1"})
	require.NoError(t, err)
	beat := func(apiserver string) {
		t.Helper()
		require.NoError(t, ag.client(leader.addr).Heartbeat(ctx, api.AgentHealth{Cluster: "lab", Node: "cp-1",
			Kubelet: api.ComponentHealth{Healthy: true, Version: "v1.33.6"}, Containerd: api.ComponentHealth{Healthy: true, Version: "1.7.0"},
			StaticPods: []api.StaticPodStatus{
				{Name: "kube-apiserver-cp-1", Image: "registry.k8s.io/kube-apiserver:v1.33.5", Ready: false}, // the old one, exited
				{Name: "kube-apiserver-cp-1", Image: apiserver, Ready: true},
				{Name: "kube-proxy-x7k2p", Image: "registry.k8s.io/kube-proxy:v1.33.6", Ready: true}, // a DaemonSet's
			}}))
	}
	agent := func() api.AgentStatus {
		t.Helper()
		c, err := leader.c.Cluster("lab")
		require.NoError(t, err)
		for _, a := range c.Status.Agents {
			if a.Node == "cp-1" {
				return a
			}
		}
		t.Fatal("cp-1 not in the cluster's agents")
		return api.AgentStatus{}
	}

	beat("registry.k8s.io/kube-apiserver:v1.33.6")
	a := agent()
	require.Equal(t, map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v1.33.6"}, a.StaticPods)
	require.Empty(t, a.Drift)
	idx := leader.c.Store().AppliedIndex()
	for range 5 {
		beat("registry.k8s.io/kube-apiserver:v1.33.6")
	}
	require.Equal(t, idx, leader.c.Store().AppliedIndex(), "unchanged static pods write no entry")

	// The API server's manifest replaced by hand with another image.
	beat("registry.k8s.io/kube-apiserver:v1.34.4")
	require.Equal(t, idx+1, leader.c.Store().AppliedIndex(), "a changed image is one entry")
	a = agent()
	require.Equal(t, "registry.k8s.io/kube-apiserver:v1.34.4", a.StaticPods["kube-apiserver"])
	require.Equal(t, "static pod kube-apiserver runs registry.k8s.io/kube-apiserver:v1.34.4, recorded registry.k8s.io/kube-apiserver:v1.33.6", a.Drift)
}
