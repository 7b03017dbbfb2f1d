package convert_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/preflight"
)

// TestPreflightRelease: the checks see a catalog entry's downloads named
// as the agent's CheckArtifacts names them; a binary with neither URL nor
// sum is absent, one with a sum but no URL present (release-in-catalog
// names it).
func TestPreflightRelease(t *testing.T) {
	r := api.Release{Version: "1.34.1", Components: api.ReleaseComponents{
		Kubelet:    api.BinaryArtifact{URL: "https://m/kubelet", SHA256: "k"},
		Containerd: api.BinaryArtifact{SHA256: "c", Version: "2.1.4"},
		Images:     []api.ImageArchive{{URL: "https://m/a.tar", SHA256: "a"}, {}},
	}}
	require.Equal(t, preflight.Release{Version: "1.34.1", Artifacts: []preflight.Artifact{
		{Name: "kubelet", URL: "https://m/kubelet", SHA256: "k"},
		{Name: "containerd", SHA256: "c"},
		{Name: "image-0", URL: "https://m/a.tar", SHA256: "a"},
		{Name: "image-1"},
	}}, convert.PreflightRelease(r))
	require.Equal(t, preflight.Release{Version: "1.34.1", Artifacts: []preflight.Artifact{}}, convert.PreflightRelease(api.Release{Version: "1.34.1"}))
}

// TestPreflightHostResult: a report's kind maps to the engine's host
// operation; an empty one is left for the ID's suffix to tell, and one the
// engine does not know stays unknown rather than falling back to it.
func TestPreflightHostResult(t *testing.T) {
	for _, tc := range []struct {
		kind api.OperationKind
		want preflight.HostOp
	}{
		{api.OpCheckArtifacts, preflight.HostOpArtifacts},
		{api.OpProbePeers, preflight.HostOpPeers},
		{"", ""},
	} {
		require.Equal(t, tc.want, convert.PreflightHostResult(api.OperationResult{ID: "x-peers", Kind: tc.kind}).Op)
	}
	unknown := convert.PreflightHostResult(api.OperationResult{ID: "x-peers", Kind: api.OpRollback, State: api.OpSucceeded})
	require.Equal(t, preflight.HostCheck{}, preflight.HostCheckFromResults([]preflight.HostResult{unknown}))

	res := convert.PreflightHostResult(api.OperationResult{ID: "x", State: api.OpFailed, Message: "m", Details: map[string]string{"a": "b"}})
	require.True(t, res.Finished)
	require.False(t, res.Succeeded)
	require.False(t, convert.PreflightHostResult(api.OperationResult{State: api.OpRunning}).Finished)
}
