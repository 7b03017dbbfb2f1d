package statemachine

import "github.com/moltproject/molt/phases"

// What the hosts report against what molt recorded. The agents' kubelet
// and containerd versions and their static pods' images are replicated
// already (AgentRecord, committed by AgentHealthCmd only when they
// change), so drift is read from the replicated state by every member
// alike and needs no command of its own.

// SinceStaticPods is the release that added AgentHealthCmd.StaticPods:
// the coordinator carries static pods' images only when every member
// reads them.
const SinceStaticPods = "0.2.0"

// expected is what molt's record says every node of r runs: the status
// version, or either end of an upgrade that moved nodes and did not
// finish (running, failed, cancelled: a node may be at either), and the
// containerd and static pods' images of those versions' releases when
// they name them.
func (s *state) expected(r *ClusterRecord) phases.Expected {
	var want phases.Expected
	vs := []phases.Version{r.StatusVersion}
	if u := r.Upgrade; u != nil {
		switch u.State {
		case phases.UpgradeRunning, phases.UpgradeFailed, phases.UpgradeCancelled:
			vs = []phases.Version{u.From, u.To}
		}
	}
	for _, v := range vs {
		if v.IsZero() {
			continue
		}
		want.Kubelet = append(want.Kubelet, v)
		rel, ok := s.Releases[v.String()]
		if !ok {
			continue
		}
		if rel.Components.Containerd.Version != "" {
			want.Containerd = append(want.Containerd, rel.Components.Containerd.Version)
		}
		for pod, image := range rel.Components.StaticPods {
			if want.StaticPods == nil {
				want.StaticPods = map[string][]string{}
			}
			want.StaticPods[pod] = append(want.StaticPods[pod], image)
		}
	}
	return want
}

// drift returns, by node, how each registered agent's reported versions
// differ from r's record (phases.Drift); nil when none does.
func (s *state) drift(r *ClusterRecord) map[string]string {
	var out map[string]string
	want := s.expected(r)
	for node, a := range r.Agents {
		if !a.Registered {
			continue
		}
		if d := phases.Drift(want, phases.Observed{Kubelet: a.Kubelet, Containerd: a.Containerd, StaticPods: a.StaticPods}); d != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[node] = d
		}
	}
	return out
}

// Drift returns, by node, how the versions the cluster's agents report
// differ from molt's record of what they run (phases.RuleVersionDrift);
// nil when they agree or have not reported.
func (f *Machine) Drift(cluster string) (map[string]string, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	r, err := f.st.cluster(cluster)
	if err != nil {
		return nil, err
	}
	return f.st.drift(r), nil
}

// ObservedKubelets returns the kubelet version each registered agent of
// the cluster reports, by node (nodes without a parseable report left
// out).
func ObservedKubelets(r *ClusterRecord) map[string]phases.Version {
	out := map[string]phases.Version{}
	for node, a := range r.Agents {
		if v, ok := phases.ParseKubelet(a.Kubelet); ok && a.Registered {
			out[node] = v
		}
	}
	return out
}

// ObservedVersion is the lowest kubelet version the cluster's registered
// agents report: what the whole cluster runs, as observed; zero when no
// agent has reported one.
func ObservedVersion(r *ClusterRecord) phases.Version {
	var vs []phases.Version
	for _, v := range ObservedKubelets(r) {
		vs = append(vs, v)
	}
	return phases.Lowest(vs)
}
