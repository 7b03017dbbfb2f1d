package statemachine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
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
