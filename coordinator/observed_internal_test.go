package coordinator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
)

// TestStatusFromObservation: status.version is the lowest kubelet the
// agents report, the record moves to recordedVersion when it differs, and
// each component's lastSeen is the latest beat heard at its lowest
// version (the replicated change time when this member heard none).
func TestStatusFromObservation(t *testing.T) {
	t0 := time.Date(2027, 3, 1, 10, 0, 0, 0, time.UTC)
	r := &statemachine.ClusterRecord{Spec: phases.ClusterSpec{Name: "lab"}, StatusVersion: phases.MustParseVersion("1.33.6"),
		Agents: map[string]*statemachine.AgentRecord{
			"a": {Registered: true, Kubelet: "v1.34.4", Containerd: "2.1.4", ChangedAt: t0},
			"b": {Registered: true, Kubelet: "v1.34.5", Containerd: "2.1.4", ChangedAt: t0},
			"c": {Registered: true, Kubelet: "v1.34.4", Containerd: "2.1.4", ChangedAt: t0.Add(time.Minute)},
		}}
	live := newLiveness()
	live.beat("lab", "a", t0.Add(5*time.Minute))
	live.beat("lab", "b", t0.Add(9*time.Minute))

	st := clusterView(r, live, map[string]string{"a": "kubelet 1.34.4, recorded 1.33.6"}).Status
	require.Equal(t, "1.34.4", st.Version, "the lowest observed")
	require.Equal(t, "1.33.6", st.RecordedVersion)
	require.Equal(t, &api.ObservedComponent{Version: "1.34.4", Nodes: map[string]int{"1.34.4": 2, "1.34.5": 1}, LastSeen: t0.Add(5 * time.Minute)}, st.Observed.Kubelet)
	require.Equal(t, &api.ObservedComponent{Version: "2.1.4", Nodes: map[string]int{"2.1.4": 3}, LastSeen: t0.Add(9 * time.Minute)}, st.Observed.Containerd)
	require.Equal(t, "kubelet 1.34.4, recorded 1.33.6", st.Agents[0].Drift)
	require.Empty(t, st.Agents[1].Drift)

	// Agreeing with the record: no recordedVersion.
	r.StatusVersion = phases.MustParseVersion("1.34.4")
	require.Empty(t, clusterView(r, live, nil).Status.RecordedVersion)
	// Nothing reported: the record, and no observed block.
	r.Agents = nil
	st = clusterView(r, live, nil).Status
	require.Equal(t, "1.34.4", st.Version)
	require.Nil(t, st.Observed)
}

// TestFleetKeySeesDrift: the scheduler passes again when a node drifts or
// agrees again (its fleet key changes), so a drift block ends with the
// beat that agrees, not at the next periodic pass.
func TestFleetKeySeesDrift(t *testing.T) {
	f := func(drift map[string]string) *schedule.Fleet {
		return &schedule.Fleet{Clusters: []schedule.Cluster{{Name: "lab", Current: phases.MustParseVersion("1.33.13"), Drift: drift}}}
	}
	agrees := fleetKey(f(nil))
	drifted := fleetKey(f(map[string]string{"worker-1": "kubelet 1.34.4, recorded 1.33.13"}))
	require.NotEqual(t, agrees, drifted)
	require.NotEqual(t, drifted, fleetKey(f(map[string]string{"worker-1": "kubelet 1.34.3, recorded 1.33.13"})))
	require.Equal(t, agrees, fleetKey(f(map[string]string{})))
}
