package preflight

import (
	"fmt"
	"strings"
)

// checkNodesReady requires every node of the spec to exist in the API
// server and be Ready: upgrading next to a node that is already down could
// take more capacity (or etcd members) away than the budgets allow.
func checkNodesReady(in Input) Result {
	if g := in.gap(SourceNodes); g != "" {
		return missing(g)
	}
	names := NodeNames(in.Cluster)
	if len(names) == 0 {
		return missing("the cluster spec lists no nodes")
	}
	bad := map[string]string{}
	for _, n := range names {
		info, ok := in.Nodes[n]
		switch {
		case !ok:
			bad[n] = "not found"
		case !info.Ready:
			bad[n] = "NotReady"
		}
	}
	if len(bad) > 0 {
		return fail(fmt.Sprintf("%s not Ready: %s", plural(len(bad), "node", "nodes"), describe(bad)), bad)
	}
	return pass(fmt.Sprintf("all %s Ready", plural(len(names), "node is", "nodes are")), nil)
}

// checkAgentsReporting requires a live agent on every node: the upgrade's
// host work is done by agents, and one that stopped beating would leave its
// node half upgraded.
func checkAgentsReporting(in Input) Result {
	names := NodeNames(in.Cluster)
	if len(names) == 0 {
		return missing("the cluster spec lists no nodes")
	}
	grace := in.HeartbeatGrace
	if grace <= 0 {
		grace = DefaultHeartbeatGrace
	}
	bad := map[string]string{}
	for _, n := range names {
		a, ok := in.Agents[n]
		switch {
		case !ok || !a.Registered:
			bad[n] = "agent not registered"
		case a.Missing:
			bad[n] = "agent missing"
		case a.LastSeen.IsZero():
			bad[n] = "no heartbeat seen by this coordinator yet"
		case in.Now.Sub(a.LastSeen) > grace:
			bad[n] = fmt.Sprintf("last heartbeat %s ago, grace %s", in.Now.Sub(a.LastSeen).Round(1e9), grace)
		case !a.Healthy:
			bad[n] = "agent reports kubelet or containerd unhealthy"
		}
	}
	if len(bad) > 0 {
		return fail(fmt.Sprintf("%s not reporting: %s", plural(len(bad), "agent", "agents"), describe(bad)), bad)
	}
	return pass(fmt.Sprintf("all %s reporting and healthy", plural(len(names), "agent is", "agents are")), nil)
}

// checkControlPlaneHealth requires /readyz to be ok and to have reported
// on etcd: an upgrade takes control-plane nodes (and their etcd members)
// down one by one, which a cluster already short of quorum cannot survive.
func checkControlPlaneHealth(in Input) Result {
	if g := in.gap(SourceControlPlane); g != "" {
		return missing(g)
	}
	cp := in.ControlPlane
	data := map[string]string{}
	if len(cp.Failing) > 0 {
		data["failing"] = strings.Join(cp.Failing, ",")
	}
	if !cp.Ready || len(cp.Failing) > 0 {
		msg := "the API server is not ready"
		if len(cp.Failing) > 0 {
			msg += "; failing: " + nameList(cp.Failing)
		}
		if etcdFailing(cp) {
			msg += " (etcd unhealthy)"
		}
		if cp.Message != "" {
			msg += " — " + cp.Message
		}
		return fail(msg, data)
	}
	if !hasEtcd(cp.Passed) {
		return missing("/readyz did not report on etcd (the verbose answer lists no etcd check)")
	}
	return pass(fmt.Sprintf("the API server is ready; %s passed, etcd included", plural(len(cp.Passed), "readiness check", "readiness checks")), nil)
}

func etcdFailing(cp ControlPlaneHealth) bool { return hasEtcd(cp.Failing) }

// hasEtcd finds the API server's etcd checks ("etcd", "etcd-readiness").
func hasEtcd(names []string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, "etcd") {
			return true
		}
	}
	return false
}
