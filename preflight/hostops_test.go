package preflight_test

import (
	"testing"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/preflight"
	"github.com/stretchr/testify/require"
)

// hostOperations is preflight.HostOperations as the agents receive them
// (api/convert writes them for the wire), so that each can be validated
// as the agent validates it.
func hostOperations(runID string, in preflight.Input, apiEndpoint string, agentAddrs map[string]string) map[string][]api.Operation {
	return convert.PreflightOperationsToAPI(preflight.HostOperations(runID, in, apiEndpoint, agentAddrs))
}

// hostCheck is preflight.HostCheckFromResults over the agents' reports as
// the wire carries them.
func hostCheck(results []api.OperationResult) preflight.HostCheck {
	return preflight.HostCheckFromResults(conv.Slice(results, convert.PreflightHostResult))
}

var agentAddrs = map[string]string{"cp-1": "10.0.0.10:7443", "w-1": "10.0.0.11:7443", "w-2": "10.0.0.12:7443"}

func TestHostOperations(t *testing.T) {
	ops := hostOperations("run1", goodInput(), "10.0.0.1:6443", agentAddrs)
	require.Len(t, ops, 3)
	for _, n := range allNodes {
		list := ops[n]
		require.Len(t, list, 2, n)
		for _, op := range list {
			require.NoError(t, op.Validate(), op.ID)
		}
		art, peers := list[0], list[1]
		require.Equal(t, api.OpCheckArtifacts, art.Kind)
		require.Equal(t, "preflight-run1-"+n+"-artifacts", art.ID)
		require.Equal(t, []api.Artifact{
			{Name: "kubelet", URL: "https://mirror.example/kubelet-1.34.1", SHA256: sum},
			{Name: "containerd", URL: "https://mirror.example/containerd-2.1.4", SHA256: sum},
			{Name: "image-0", URL: "https://mirror.example/images-1.34.1.tar", SHA256: sum},
		}, art.CheckArtifacts.Artifacts)
		require.Equal(t, api.OpProbePeers, peers.Kind)
		require.Equal(t, "preflight-run1-"+n+"-peers", peers.ID)
		require.NotContains(t, peers.ProbePeers.Addresses, agentAddrs[n], "a host does not probe itself")
		require.Len(t, peers.ProbePeers.Addresses, 3)
		require.Equal(t, "10.0.0.1:6443", peers.ProbePeers.Addresses[2], "API endpoint last")
	}
	require.Equal(t, []string{"10.0.0.10:7443", "10.0.0.12:7443", "10.0.0.1:6443"}, ops["w-1"][1].ProbePeers.Addresses)

	again := hostOperations("run1", goodInput(), "10.0.0.1:6443", agentAddrs)
	require.Equal(t, ops, again, "deterministic: a new leader rebuilds the same operations")
}

func TestHostOperationsEdgeCases(t *testing.T) {
	t.Run("no release: probe only", func(t *testing.T) {
		ops := hostOperations("r", with(func(in *preflight.Input) { in.Release = nil }), "api:6443", agentAddrs)
		for _, n := range allNodes {
			require.Len(t, ops[n], 1)
			require.Equal(t, api.OpProbePeers, ops[n][0].Kind)
			require.NoError(t, ops[n][0].Validate())
		}
	})
	t.Run("peer without address is skipped", func(t *testing.T) {
		ops := hostOperations("r", goodInput(), "", map[string]string{"w-1": "10.0.0.11:7443"})
		require.Equal(t, []string{"10.0.0.11:7443"}, ops["cp-1"][1].ProbePeers.Addresses)
		require.Empty(t, ops["w-1"][1].ProbePeers.Addresses)
		require.NoError(t, ops["w-1"][1].Validate())
	})
	t.Run("artifact without URL is left out", func(t *testing.T) {
		ops := hostOperations("r", with(func(in *preflight.Input) { in.Release.Artifacts[2] = preflight.Artifact{Name: "image-0"} }), "", nil)
		require.Len(t, ops["w-1"][0].CheckArtifacts.Artifacts, 2)
	})
}

func TestHostCheckFromResults(t *testing.T) {
	t0 := now
	artOK := api.OperationResult{ID: "preflight-r-w-1-artifacts", Kind: api.OpCheckArtifacts, State: api.OpSucceeded, FinishedAt: t0,
		Details: map[string]string{"artifact.kubelet": "ok", "artifact.containerd": "ok", "freeBytes./var/lib/molt": "5368709120", "freeBytes./usr/local/bin": "1073741824"}}
	peersOK := api.OperationResult{ID: "preflight-r-w-1-peers", Kind: api.OpProbePeers, State: api.OpSucceeded, FinishedAt: t0,
		Details: map[string]string{"10.0.0.10:7443": "ok", "10.0.0.1:6443": "ok"}}
	for _, tc := range []struct {
		name    string
		results []api.OperationResult
		want    preflight.HostCheck
	}{
		{"nothing yet", nil, preflight.HostCheck{}},
		{"running is no answer", []api.OperationResult{{ID: artOK.ID, Kind: api.OpCheckArtifacts, State: api.OpRunning}}, preflight.HostCheck{}},
		{"both ok", []api.OperationResult{artOK, peersOK}, preflight.HostCheck{
			ArtifactsChecked: true, ArtifactsOK: true,
			FreeBytes:   map[string]uint64{"/var/lib/molt": 5 << 30, "/usr/local/bin": 1 << 30},
			PeersProbed: true,
		}},
		{"checksum mismatch and unreachable API", []api.OperationResult{
			{ID: "a", Kind: api.OpCheckArtifacts, State: api.OpFailed, Message: "preflight check failed: kubelet: checksum",
				Details: map[string]string{"artifact.kubelet": "checksum mismatch: want sha256 ab…", "artifact.containerd": "ok", "requiredBytes": "300"}},
			{ID: "p", Kind: api.OpProbePeers, State: api.OpFailed, Message: "preflight check failed: 1 of 2 peers unreachable",
				Details: map[string]string{"10.0.0.10:7443": "ok", "10.0.0.1:6443": "dial tcp 10.0.0.1:6443: i/o timeout"}},
		}, preflight.HostCheck{
			ArtifactsChecked: true, FailedArtifacts: map[string]string{"kubelet": "checksum mismatch: want sha256 ab…"},
			ArtifactsMessage: "preflight check failed: kubelet: checksum", RequiredBytes: 300,
			PeersProbed: true, Unreachable: map[string]string{"10.0.0.1:6443": "dial tcp 10.0.0.1:6443: i/o timeout"},
			ProbeMessage: "preflight check failed: 1 of 2 peers unreachable",
		}},
		{"failed without details", []api.OperationResult{{ID: "x-artifacts", State: api.OpFailed}, {ID: "x-peers", State: api.OpFailed}},
			preflight.HostCheck{ArtifactsChecked: true, ArtifactsMessage: "CheckArtifacts failed", PeersProbed: true, ProbeMessage: "ProbePeers failed"}},
		{"latest finished wins", []api.OperationResult{
			artOK,
			{ID: "old", Kind: api.OpCheckArtifacts, State: api.OpFailed, FinishedAt: t0.Add(-time.Minute), Message: "old failure"},
		}, preflight.HostCheck{ArtifactsChecked: true, ArtifactsOK: true, FreeBytes: map[string]uint64{"/var/lib/molt": 5 << 30, "/usr/local/bin": 1 << 30}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, hostCheck(tc.results))
		})
	}
}

// TestHostResultsThroughChecks runs agents' raw results through the host
// checks end to end.
func TestHostResultsThroughChecks(t *testing.T) {
	in := goodInput()
	ops := hostOperations("r", in, "10.0.0.1:6443", agentAddrs)
	for _, n := range allNodes {
		var results []api.OperationResult
		for _, op := range ops[n] {
			d := map[string]string{}
			if op.CheckArtifacts != nil {
				for _, a := range op.CheckArtifacts.Artifacts {
					d[preflight.DetailArtifactPrefix+a.Name] = preflight.DetailOK
				}
				d[preflight.DetailFreeBytesPrefix+"/var/lib/molt"] = "10737418240"
			} else {
				for _, a := range op.ProbePeers.Addresses {
					d[a] = preflight.DetailOK
				}
			}
			results = append(results, api.OperationResult{ID: op.ID, Kind: op.Kind, State: api.OpSucceeded, Details: d})
		}
		in.HostChecks[n] = hostCheck(results)
	}
	rep, err := preflight.RunOnly(in, preflight.IDArtifacts, preflight.IDDiskSpace, preflight.IDNetworkReachability)
	require.NoError(t, err)
	require.Equal(t, preflight.Passed, rep.Verdict, "%+v", rep.Results)
}
