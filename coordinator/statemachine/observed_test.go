package statemachine

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore/command"
)

// TestDriftFromTheRecord: drift compares what each registered agent
// reports with the record — the status version, either end of an upgrade
// that moved nodes and did not finish, the containerd of those releases —
// and the observed version is the lowest reported kubelet.
func TestDriftFromTheRecord(t *testing.T) {
	v := phases.MustParseVersion
	s := newState()
	s.Releases["1.33.6"] = &api.Release{Version: "1.33.6", Components: api.ReleaseComponents{Containerd: api.BinaryArtifact{Version: "1.7.0"}}}
	s.Releases["1.34.4"] = &api.Release{Version: "1.34.4", Components: api.ReleaseComponents{Containerd: api.BinaryArtifact{Version: "2.1.4"}}}
	r := &ClusterRecord{StatusVersion: v("1.33.6"), Agents: map[string]*AgentRecord{
		"cp-1":  {Registered: true, Kubelet: "v1.33.6", Containerd: "1.7.0"},
		"w-1":   {Registered: true, Kubelet: "v1.34.4", Containerd: "1.7.0"},
		"w-2":   {Registered: true, Kubelet: "v1.33.6", Containerd: "1.6.20"},
		"w-3":   {Registered: true}, // not reported yet
		"w-old": {Registered: false, Kubelet: "v1.20.0"},
	}}
	require.Equal(t, map[string]string{
		"w-1": "kubelet 1.34.4, recorded 1.33.6",
		"w-2": "containerd 1.6.20, recorded 1.7.0",
	}, s.drift(r))
	require.Equal(t, v("1.33.6"), ObservedVersion(r))
	require.Equal(t, map[string]phases.Version{"cp-1": v("1.33.6"), "w-1": v("1.34.4"), "w-2": v("1.33.6")}, ObservedKubelets(r))

	// While an upgrade that moved nodes runs (or after it failed or was
	// cancelled), either end is the record.
	r.Upgrade = &phases.Upgrade{From: v("1.33.6"), To: v("1.34.4"), State: phases.UpgradeRunning}
	r.Agents["w-1"].Containerd = "2.1.4"
	require.Equal(t, map[string]string{"w-2": "containerd 1.6.20, recorded 1.7.0 or 2.1.4"}, s.drift(r))
	// A refused upgrade moved nothing: the status version alone.
	r.Upgrade.State = phases.UpgradeRefused
	require.Contains(t, s.drift(r), "w-1")

	// Every node at one version that is not the record: all drift, and
	// the observed version is theirs.
	r.Upgrade = nil
	for _, a := range r.Agents {
		a.Kubelet, a.Containerd = "v1.34.4", "2.1.4"
	}
	require.Len(t, s.drift(r), 4, "every registered agent")
	require.Equal(t, v("1.34.4"), ObservedVersion(r))

	// No agent reported: no drift, no observed version.
	r.Agents = nil
	require.Nil(t, s.drift(r))
	require.True(t, ObservedVersion(r).IsZero())
}

// TestStaticPodsRecordedAndCompared: AgentHealthCmd replaces the record's
// static pods only when it carries them (nil: a beat that did not, kept as
// it was), needs SinceStaticPods only then, and the images are compared
// with the recorded releases' (either end while an upgrade moved nodes).
func TestStaticPodsRecordedAndCompared(t *testing.T) {
	v := phases.MustParseVersion
	s := newState()
	s.Releases["1.33.13"] = &api.Release{Version: "1.33.13", Components: api.ReleaseComponents{StaticPods: map[string]string{"etcd": "registry.k8s.io/etcd:3.5.21-0"}}}
	s.Releases["1.34.4"] = &api.Release{Version: "1.34.4", Components: api.ReleaseComponents{StaticPods: map[string]string{"etcd": "registry.k8s.io/etcd:3.6.4-0"}}}
	s.Clusters["c"] = &ClusterRecord{StatusVersion: v("1.33.13"), Agents: map[string]*AgentRecord{"cp-1": {Registered: true}}}
	r := s.Clusters["c"]

	beat := AgentHealthCmd{Cluster: "c", Node: "cp-1", Healthy: true, Kubelet: "v1.33.13", StaticPods: map[string]string{"etcd": "registry.k8s.io/etcd:3.6.4-0"}}
	require.Equal(t, SinceStaticPods, MinVersion(beat))
	_, err := s.agentHealth(beat)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"etcd": "registry.k8s.io/etcd:3.6.4-0"}, r.Agents["cp-1"].StaticPods)
	require.Equal(t, map[string]string{"cp-1": "static pod etcd runs registry.k8s.io/etcd:3.6.4-0, recorded registry.k8s.io/etcd:3.5.21-0"}, s.drift(r))

	// While an upgrade to 1.34.4 moved nodes, 3.6.4 is either end.
	r.Upgrade = &phases.Upgrade{From: v("1.33.13"), To: v("1.34.4"), State: phases.UpgradeRunning}
	require.Nil(t, s.drift(r))
	r.Upgrade = nil

	// A beat without static pods (an older writer) keeps them; one that
	// carries none clears them.
	old := beat
	old.StaticPods = nil
	require.Equal(t, command.BaselineVersion, MinVersion(old))
	_, err = s.agentHealth(old)
	require.NoError(t, err)
	require.Len(t, r.Agents["cp-1"].StaticPods, 1)
	none := beat
	none.StaticPods = map[string]string{}
	_, err = s.agentHealth(none)
	require.NoError(t, err)
	require.Nil(t, r.Agents["cp-1"].StaticPods)
	require.Nil(t, s.drift(r))

	// The persisted form keeps "none" and "not carried" apart.
	for _, c := range []AgentHealthCmd{beat, old, none} {
		b, err := json.Marshal(c)
		require.NoError(t, err)
		var back AgentHealthCmd
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, c.StaticPods == nil, back.StaticPods == nil, string(b))
		require.Equal(t, len(c.StaticPods), len(back.StaticPods))
	}
}
