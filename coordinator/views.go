package coordinator

import (
	"slices"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
)

// copyUpgrade copies an upgrade deep enough that the FSM may go on
// changing the original: transitions assign fields of slice elements and
// replace (never modify) inner slices.
func copyUpgrade(u *phases.Upgrade) *phases.Upgrade {
	if u == nil {
		return nil
	}
	cp := *u
	cp.Steps = slices.Clone(u.Steps)
	cp.Pools = slices.Clone(u.Pools)
	cp.Nodes = slices.Clone(u.Nodes)
	return &cp
}

// clusterView renders a record for the API, under the FSM read lock.
func clusterView(r *clusterRecord, live *liveness, clock Clock) api.Cluster {
	spec := r.Spec
	spec.Pools = slices.Clone(r.Spec.Pools)
	out := api.Cluster{Spec: api.ClusterSpec{ClusterSpec: spec}}
	st := &out.Status
	st.Version = r.StatusVersion.String()
	st.Versions = r.nodeVersions("")
	for _, p := range r.Spec.Pools {
		switch p.Role {
		case phases.RoleControlPlane:
			st.ControlPlaneNodepoolStatus = api.PoolStatus{Name: p.Name, Versions: r.nodeVersions(p.Name)}
		case phases.RoleControlPlaneLB:
			st.ControlPlaneLBNodepoolStatus = api.PoolStatus{Name: p.Name, Versions: r.nodeVersions(p.Name)}
		}
	}
	st.AppliedManifestsVersion = r.AddonsVersion.String()
	st.LifecycleControllersManifestsVersion = r.LifecycleVersion.String()
	st.Upgrade = copyUpgrade(r.Upgrade)
	st.History = slices.Clone(r.History)
	for _, node := range sortedKeys(r.Agents) {
		a := r.Agents[node]
		as := api.AgentStatus{Node: node, Registered: a.Registered, Missing: a.Missing, Healthy: a.Healthy, Kubelet: a.Kubelet, Containerd: a.Containerd}
		if t, ok := live.lastSeen(nodeKey(r.Spec.Name, node)); ok {
			as.LastSeen = t
		}
		st.Agents = append(st.Agents, as)
	}
	return out
}
