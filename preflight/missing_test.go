package preflight_test

import (
	"errors"
	"testing"

	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
	"github.com/stretchr/testify/require"
)

// TestMissingDataFails is the rule "never pass silently": for each check,
// taking away the data it needs turns it into a failure whose message
// says what is missing.
func TestMissingDataFails(t *testing.T) {
	notGathered := func(s preflight.Source) func(*preflight.Input) {
		return func(in *preflight.Input) { delete(in.Gathered, s) }
	}
	for _, tc := range []struct {
		check    string
		name     string
		strip    func(*preflight.Input)
		contains string
	}{
		{preflight.IDVersionRules, "no current version", func(in *preflight.Input) { in.Current = phases.Version{} }, "current version is unknown"},
		{preflight.IDVersionRules, "no target", func(in *preflight.Input) { in.Target = phases.Version{} }, "no target version"},
		{preflight.IDVersionRules, "user cluster, admin version unknown", func(in *preflight.Input) { in.Cluster = cluster(phases.KindUser) }, `admin cluster "admin-1" is unknown`},
		{preflight.IDReleaseInCatalog, "no target", func(in *preflight.Input) { in.Target = phases.Version{} }, "no target version"},
		{preflight.IDArtifacts, "no host reports at all", func(in *preflight.Input) { in.HostChecks = nil }, "no artifacts report from 3 hosts: cp-1, w-1, w-2"},
		{preflight.IDArtifacts, "no release", func(in *preflight.Input) { in.Release = nil }, "no artifacts to verify"},
		{preflight.IDArtifacts, "no nodes in the spec", func(in *preflight.Input) { in.Cluster.Pools = nil }, "lists no nodes"},
		{preflight.IDNodesReady, "nodes not gathered", notGathered(preflight.SourceNodes), "nodes were not gathered"},
		{preflight.IDNodesReady, "nodes read failed", func(in *preflight.Input) { in.SetGathered(preflight.SourceNodes, errors.New("connection refused")) }, "connection refused"},
		{preflight.IDAgentsReporting, "no agents known", func(in *preflight.Input) { in.Agents = nil }, "not registered"},
		{preflight.IDControlPlaneHealth, "readyz not gathered", notGathered(preflight.SourceControlPlane), "controlPlane were not gathered"},
		{preflight.IDDiskSpace, "no host reports", func(in *preflight.Input) { in.HostChecks = nil }, "no free disk space report"},
		{preflight.IDNetworkReachability, "no host reports", func(in *preflight.Input) { in.HostChecks = nil }, "no reachability probe report"},
		{preflight.IDPDBsBlockingDrain, "pdbs not gathered", notGathered(preflight.SourcePDBs), "pdbs were not gathered"},
		{preflight.IDProtectedPods, "pods not gathered", notGathered(preflight.SourceProtectedPods), "protectedPods were not gathered"},
		{preflight.IDDeprecatedAPIs, "metrics not gathered", notGathered(preflight.SourceDeprecatedAPIs), "deprecatedAPIs were not gathered"},
		{preflight.IDDeprecatedAPIs, "no current version", func(in *preflight.Input) { in.Current = phases.Version{} }, "current version is unknown"},
	} {
		t.Run(tc.check+"/"+tc.name, func(t *testing.T) {
			runCheck(t, tc.check, checkCase{in: with(tc.strip), status: preflight.Fail, contains: []string{tc.contains}})
		})
	}
}

// TestEmptyInputBlocks: a run on nothing blocks on every blocking check
// and passes none.
func TestEmptyInputBlocks(t *testing.T) {
	rep := preflight.Run(preflight.Input{})
	require.Equal(t, preflight.Failed, rep.Verdict)
	for _, r := range rep.Results {
		require.Equal(t, preflight.Fail, r.Status, "%s passed on an empty input: %s", r.Check, r.Message)
	}
	var blocking []string
	for _, c := range preflight.Checks() {
		if c.Severity == preflight.Blocking {
			blocking = append(blocking, c.ID)
		}
	}
	require.ElementsMatch(t, blocking, rep.Failed)
}

func TestNoClusterAccess(t *testing.T) {
	in := goodInput()
	in.Gathered = nil
	preflight.GatherCluster(t.Context(), nil, &in)
	rep := preflight.Run(in)
	require.Equal(t, []string{preflight.IDControlPlaneHealth, preflight.IDNodesReady}, rep.Failed)
	r, _ := rep.Result(preflight.IDPDBsBlockingDrain)
	require.Equal(t, preflight.Fail, r.Status)
	require.Contains(t, r.Message, preflight.ErrNoClusterAccess.Error())
}
