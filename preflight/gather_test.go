package preflight_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/moltproject/molt/preflight"
	"github.com/stretchr/testify/require"
)

// failingPDBs reads everything except budgets. Only the error path uses a
// stand-in; the reader itself is tested against a real API server.
type failingPDBs struct{}

func (failingPDBs) Nodes(context.Context, []string) (map[string]preflight.NodeInfo, error) {
	return map[string]preflight.NodeInfo{"cp-1": {Ready: true}, "w-1": {Ready: true}, "w-2": {Ready: true}}, nil
}

func (failingPDBs) ControlPlane(context.Context) (preflight.ControlPlaneHealth, error) {
	return preflight.ParseReadyz(200, "[+]etcd ok\nreadyz check passed"), nil
}

func (failingPDBs) BlockingPDBs(context.Context, []string) ([]preflight.PDBInfo, error) {
	return nil, errors.New("policy/v1 forbidden")
}

func (failingPDBs) ProtectedPods(context.Context, []string, time.Time) ([]preflight.ProtectedPod, error) {
	return nil, nil
}

func (failingPDBs) DeprecatedAPIs(context.Context) ([]preflight.DeprecatedAPI, error) {
	return nil, nil
}

func TestGatherClusterRecordsFailures(t *testing.T) {
	in := goodInput()
	in.Gathered, in.Nodes, in.BlockingPDBs, in.ProtectedPods = nil, nil, nil, nil
	preflight.GatherCluster(t.Context(), failingPDBs{}, &in)
	require.Equal(t, map[preflight.Source]string{
		preflight.SourceNodes: "", preflight.SourceControlPlane: "",
		preflight.SourcePDBs: "policy/v1 forbidden", preflight.SourceProtectedPods: "", preflight.SourceDeprecatedAPIs: "",
	}, in.Gathered)

	rep := preflight.Run(in)
	require.Equal(t, preflight.PassedWithWarnings, rep.Verdict, "a warning check that cannot read its data fails without blocking")
	r, _ := rep.Result(preflight.IDPDBsBlockingDrain)
	require.Equal(t, preflight.Fail, r.Status)
	require.Contains(t, r.Message, "policy/v1 forbidden")
	r, _ = rep.Result(preflight.IDProtectedPods)
	require.Equal(t, preflight.Pass, r.Status, "gathered and empty is a pass")
}

// TestLiveBlocking: of the blocking checks, those judging the API server's
// answers and the agents' heartbeats are the ones a new reading may pass;
// a failed host operation is the run's answer, and a warning blocks nothing.
func TestLiveBlocking(t *testing.T) {
	in := goodInput()
	require.Empty(t, preflight.Run(in).LiveBlocking())

	in.ControlPlane = preflight.ParseReadyz(500, "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed")
	setHost(&in, "cp-1", func(h *preflight.HostCheck) { h.ArtifactsOK, h.ArtifactsMessage = false, "kubelet: checksum mismatch" })
	in.SetGathered(preflight.SourcePDBs, errors.New("policy/v1 forbidden"))
	rep := preflight.Run(in)
	require.Equal(t, []string{preflight.IDArtifacts, preflight.IDControlPlaneHealth}, rep.Failed)
	require.Equal(t, []string{preflight.IDControlPlaneHealth}, rep.LiveBlocking())

	in = goodInput()
	in.SetGathered(preflight.SourceNodes, errors.New("context deadline exceeded"))
	require.Equal(t, []string{preflight.IDNodesReady}, preflight.Run(in).LiveBlocking(), "a read that failed is read again")
}
