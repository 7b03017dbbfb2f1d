package coordinator

import (
	"maps"
	"slices"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
)

// clusterView renders a copy of a cluster's record (statemachine.Cluster)
// for the API, with the agents' last beats from the leader's liveness. The
// engine's values in the record convert through api/convert.
//
// status.version is the lowest kubelet version the agents report, once
// one has (the record otherwise); drift, by node, is the replicated
// state's (statemachine.Machine.Drift).
func clusterView(r *statemachine.ClusterRecord, live *liveness, drift map[string]string) api.Cluster {
	out := api.Cluster{Spec: convert.ClusterSpecToAPI(r.Spec)}
	st := &out.Status
	st.Version = r.StatusVersion.String()
	if obs := statemachine.ObservedVersion(r); !obs.IsZero() && obs != r.StatusVersion {
		st.Version, st.RecordedVersion = obs.String(), r.StatusVersion.String()
	}
	st.Observed = observedStatus(r, live)
	st.Versions = r.NodeVersions("")
	for _, p := range r.Spec.Pools {
		switch p.Role {
		case phases.RoleControlPlane:
			st.ControlPlaneNodepoolStatus = api.PoolStatus{Name: p.Name, Versions: r.NodeVersions(p.Name)}
		case phases.RoleControlPlaneLB:
			st.ControlPlaneLBNodepoolStatus = api.PoolStatus{Name: p.Name, Versions: r.NodeVersions(p.Name)}
		}
	}
	st.AppliedManifestsVersion = r.AddonsVersion.String()
	st.Upgrade = convert.UpgradeToAPI(r.Upgrade)
	st.History = r.History
	for _, node := range slices.Sorted(maps.Keys(r.Agents)) {
		a := r.Agents[node]
		as := api.AgentStatus{Node: node, Registered: a.Registered, Missing: a.Missing, Healthy: a.Healthy, Kubelet: a.Kubelet, Containerd: a.Containerd,
			StaticPods: maps.Clone(a.StaticPods)}
		if t, ok := live.lastSeen(nodeKey(r.Spec.Name, node)); ok {
			as.LastSeen = t
		}
		as.AgentVersion = live.version(nodeKey(r.Spec.Name, node))
		as.Drift = drift[node]
		st.Agents = append(st.Agents, as)
	}
	return out
}
