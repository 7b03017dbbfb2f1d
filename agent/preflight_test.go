package agent

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

func TestPreflightOperations(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	content := "0xC0FFEE" // 8 bytes that no journal line holds
	goodURL, goodSum := h.serve("a", []byte(content))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	require.NoError(t, closed.Close())
	_, _ = runAgent(t, h.cfg)

	tests := []struct {
		name      string
		op        api.Operation
		wantState api.OperationState
		wantMsg   string
		detail    [2]string
	}{
		{"artifacts ok", api.Operation{ID: "ca-ok", Kind: api.OpCheckArtifacts, CheckArtifacts: &api.CheckArtifacts{
			Artifacts: []api.Artifact{{Name: "kubelet", URL: goodURL, SHA256: goodSum, Size: 8}}}},
			api.OpSucceeded, "", [2]string{"artifact.kubelet", "ok"}},
		{"artifact bad sum", api.Operation{ID: "ca-sum", Kind: api.OpCheckArtifacts, CheckArtifacts: &api.CheckArtifacts{
			Artifacts: []api.Artifact{{Name: "kubelet", URL: goodURL, SHA256: sumOf([]byte("x"))}}}},
			api.OpFailed, "checksum mismatch", [2]string{}},
		{"artifact bad size", api.Operation{ID: "ca-size", Kind: api.OpCheckArtifacts, CheckArtifacts: &api.CheckArtifacts{
			Artifacts: []api.Artifact{{Name: "kubelet", URL: goodURL, SHA256: goodSum, Size: 9}}}},
			api.OpFailed, "size 8, want 9", [2]string{}},
		{"peers ok", api.Operation{ID: "pp-ok", Kind: api.OpProbePeers, ProbePeers: &api.ProbePeers{Addresses: []string{l.Addr().String()}}},
			api.OpSucceeded, "", [2]string{l.Addr().String(), "ok"}},
		{"peer down", api.Operation{ID: "pp-down", Kind: api.OpProbePeers, ProbePeers: &api.ProbePeers{Addresses: []string{l.Addr().String(), closedAddr}}},
			api.OpFailed, "1 of 2 peers unreachable", [2]string{l.Addr().String(), "ok"}},
		{"pull unreachable registry", api.Operation{ID: "pull", Kind: api.OpPullImages, PullImages: &api.PullImages{Refs: []string{"127.0.0.1:1/x:y"}}},
			api.OpFailed, "registry unreachable", [2]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			coord.enqueue(tt.op)
			res := coord.waitResult(t, tt.op.ID)
			require.Equal(t, tt.wantState, res.State, res.Message)
			require.Contains(t, res.Message, tt.wantMsg)
			if tt.detail[0] != "" {
				require.Equal(t, tt.detail[1], res.Details[tt.detail[0]])
			}
		})
	}
	// The artifact check that passed kept the artifact in the stage (the
	// fake coordinator does not say which upgrade is in progress, so the
	// agent keeps what it verified); the failed ones kept nothing. No
	// other file of the agent's holds the artifact's bytes, and no temp
	// file is left.
	dataDir := filepath.Join(h.root, "var/lib/molt-agent")
	var holding []string
	err = filepath.WalkDir(dataDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		if strings.Contains(string(b), content) {
			rel, _ := filepath.Rel(dataDir, path)
			holding = append(holding, rel)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join("stage", goodSum)}, holding)
	require.Empty(t, stageTemps(t, dataDir))
}
