package preflight_test

import (
	"errors"
	"testing"
	"time"

	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
	"github.com/stretchr/testify/require"
)

type checkCase struct {
	name   string
	in     preflight.Input
	status preflight.Status
	// contains are substrings the message must hold (nodes, rules, names).
	contains []string
}

// runCheck runs one check alone and checks the case.
func runCheck(t *testing.T, id string, tc checkCase) preflight.Result {
	t.Helper()
	rep, err := preflight.RunOnly(tc.in, id)
	require.NoError(t, err)
	require.Len(t, rep.Results, 1)
	r := rep.Results[0]
	require.Equal(t, id, r.Check)
	require.Equal(t, tc.status, r.Status, r.Message)
	for _, s := range tc.contains {
		require.Contains(t, r.Message, s)
	}
	require.Equal(t, tc.status == preflight.Fail && r.Severity == preflight.Blocking, r.Blocks)
	return r
}

func runTable(t *testing.T, id string, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runCheck(t, id, tc) })
	}
}

func v(s string) phases.Version { return phases.MustParseVersion(s) }

func TestVersionRules(t *testing.T) {
	runTable(t, preflight.IDVersionRules, []checkCase{
		{"minor upgrade", goodInput(), preflight.Pass, []string{"1.33.2 → 1.34.1"}},
		{"patch upgrade", with(func(in *preflight.Input) { in.Target = v("1.33.5") }), preflight.Pass, nil},
		{"downgrade", with(func(in *preflight.Input) { in.Target = v("1.33.1") }), preflight.Fail, []string{phases.RuleDowngrade}},
		{"same version", with(func(in *preflight.Input) { in.Target = v("1.33.2") }), preflight.Fail, []string{phases.RuleSame}},
		{"skips a minor", with(func(in *preflight.Input) { in.Target = v("1.35.0") }), preflight.Fail, []string{phases.RuleSkipMinor}},
		{"admin with users on its minor", with(func(in *preflight.Input) {
			in.Cluster = cluster(phases.KindAdmin)
			in.UserClusters = []phases.ClusterVersion{{Name: "u1", Version: v("1.33.0")}}
		}), preflight.Pass, nil},
		{"admin with a user behind", with(func(in *preflight.Input) {
			in.Cluster = cluster(phases.KindAdmin)
			in.UserClusters = []phases.ClusterVersion{{Name: "u1", Version: v("1.33.0")}, {Name: "u2", Version: v("1.32.9")}}
		}), preflight.Fail, []string{phases.RuleAdminSkew, "u2"}},
		{"hybrid with a user behind", with(func(in *preflight.Input) {
			in.Cluster = cluster(phases.KindHybrid)
			in.UserClusters = []phases.ClusterVersion{{Name: "u2", Version: v("1.32.9")}}
		}), preflight.Fail, []string{phases.RuleAdminSkew}},
		{"user at its admin's version", with(func(in *preflight.Input) {
			in.Cluster = cluster(phases.KindUser)
			in.AdminVersion = v("1.34.1")
		}), preflight.Pass, nil},
		{"user past its admin", with(func(in *preflight.Input) {
			in.Cluster = cluster(phases.KindUser)
			in.AdminVersion = v("1.33.9")
		}), preflight.Fail, []string{phases.RuleUserAhead}},
		// What the Node objects report counts, not only molt's record.
		{"recorded 1.33 but nodes run 1.32", with(func(in *preflight.Input) {
			in.Nodes["w-1"] = preflight.NodeInfo{Ready: true, KubeletVersion: "v1.32.9"}
		}), preflight.Fail, []string{phases.RuleSkipMinor, "1.32.9 → 1.34.1"}},
		{"a kubelet newer than the target API server", with(func(in *preflight.Input) {
			in.Target = v("1.33.5")
			in.Nodes["w-2"] = preflight.NodeInfo{Ready: true, KubeletVersion: "v1.34.0"}
		}), preflight.Fail, []string{phases.RuleKubeletSkew, "node w-2 runs kubelet 1.34.0"}},
		{"nodes not read: the record alone", with(func(in *preflight.Input) {
			in.Nodes["w-1"] = preflight.NodeInfo{Ready: true, KubeletVersion: "v1.32.9"}
			in.SetGathered(preflight.SourceNodes, errors.New("timeout"))
		}), preflight.Pass, nil},
	})
	t.Run("rule in data", func(t *testing.T) {
		r := runCheck(t, preflight.IDVersionRules, checkCase{in: with(func(in *preflight.Input) { in.Target = v("1.35.0") }), status: preflight.Fail})
		require.Equal(t, phases.RuleSkipMinor, r.Data["rule"])
	})
}

func TestReleaseInCatalog(t *testing.T) {
	runTable(t, preflight.IDReleaseInCatalog, []checkCase{
		{"present and complete", goodInput(), preflight.Pass, []string{"1.34.1", "3 artifacts"}},
		{"not in catalog", with(func(in *preflight.Input) { in.Release = nil }), preflight.Fail, []string{"1.34.1 is not in the release catalog"}},
		{"entry of another version", with(func(in *preflight.Input) { in.Release.Version = "1.34.0" }), preflight.Fail, []string{`"1.34.0"`}},
		{"kubelet without URL", with(func(in *preflight.Input) { in.Release.Artifacts[0].URL = "" }), preflight.Fail, []string{"kubelet (no URL)"}},
		{"no kubelet at all", with(func(in *preflight.Input) { in.Release.Artifacts = in.Release.Artifacts[1:] }), preflight.Fail, []string{"kubelet (no URL)"}},
		{"containerd without URL", with(func(in *preflight.Input) { in.Release.Artifacts[1].URL = "" }), preflight.Fail, []string{"containerd (no URL)"}},
		{"image with a bad sum", with(func(in *preflight.Input) { in.Release.Artifacts[2].SHA256 = "xyz" }), preflight.Fail, []string{"image-0 (sha256"}},
	})
}

func TestArtifacts(t *testing.T) {
	runTable(t, preflight.IDArtifacts, []checkCase{
		{"all verified", goodInput(), preflight.Pass, []string{"3 hosts"}},
		{"checksum mismatch on one host", with(func(in *preflight.Input) {
			setHost(in, "w-1", func(h *preflight.HostCheck) {
				h.ArtifactsOK = false
				h.FailedArtifacts = map[string]string{"kubelet": "checksum mismatch"}
			})
		}), preflight.Fail, []string{"w-1", "kubelet: checksum mismatch"}},
		{"failed without details", with(func(in *preflight.Input) {
			setHost(in, "cp-1", func(h *preflight.HostCheck) { h.ArtifactsOK, h.ArtifactsMessage = false, "scratch dir: read-only fs" })
		}), preflight.Fail, []string{"cp-1", "read-only fs"}},
		{"one host did not report", with(func(in *preflight.Input) { delete(in.HostChecks, "w-2") }),
			preflight.Fail, []string{"no artifacts report", "w-2"}},
	})
}

func TestNodesReady(t *testing.T) {
	runTable(t, preflight.IDNodesReady, []checkCase{
		{"all ready", goodInput(), preflight.Pass, []string{"3 nodes"}},
		{"one NotReady", with(func(in *preflight.Input) { in.Nodes["w-2"] = preflight.NodeInfo{} }),
			preflight.Fail, []string{"w-2 (NotReady)"}},
		{"one not in the API server", with(func(in *preflight.Input) { delete(in.Nodes, "cp-1") }),
			preflight.Fail, []string{"cp-1 (not found)"}},
	})
}

func TestAgentsReporting(t *testing.T) {
	runTable(t, preflight.IDAgentsReporting, []checkCase{
		{"all reporting", goodInput(), preflight.Pass, nil},
		{"beat exactly at the grace", with(func(in *preflight.Input) {
			setAgent(in, "w-1", func(a *preflight.Agent) { a.LastSeen = now.Add(-30 * time.Second) })
		}), preflight.Pass, nil},
		{"default grace when unset", with(func(in *preflight.Input) { in.HeartbeatGrace = 0 }), preflight.Pass, nil},
		{"not registered", with(func(in *preflight.Input) { delete(in.Agents, "w-1") }),
			preflight.Fail, []string{"w-1 (agent not registered)"}},
		{"missing", with(func(in *preflight.Input) { setAgent(in, "w-2", func(a *preflight.Agent) { a.Missing = true }) }),
			preflight.Fail, []string{"w-2 (agent missing)"}},
		{"stale heartbeat", with(func(in *preflight.Input) {
			setAgent(in, "cp-1", func(a *preflight.Agent) { a.LastSeen = now.Add(-31 * time.Second) })
		}), preflight.Fail, []string{"cp-1 (last heartbeat 31s ago"}},
		{"never seen by this leader", with(func(in *preflight.Input) {
			setAgent(in, "cp-1", func(a *preflight.Agent) { a.LastSeen = time.Time{} })
		}), preflight.Fail, []string{"cp-1 (no heartbeat"}},
		{"unhealthy", with(func(in *preflight.Input) { setAgent(in, "w-1", func(a *preflight.Agent) { a.Healthy = false }) }),
			preflight.Fail, []string{"w-1 (agent reports"}},
	})
}

func TestControlPlaneHealth(t *testing.T) {
	runTable(t, preflight.IDControlPlaneHealth, []checkCase{
		{"ready with etcd", goodInput(), preflight.Pass, []string{"etcd included"}},
		{"etcd failing", with(func(in *preflight.Input) {
			in.ControlPlane = preflight.ParseReadyz(500, "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed")
		}), preflight.Fail, []string{"etcd unhealthy", "failing: etcd"}},
		{"not ready without details", with(func(in *preflight.Input) { in.ControlPlane = preflight.ControlPlaneHealth{} }),
			preflight.Fail, []string{"not ready"}},
		{"ready but etcd not reported", with(func(in *preflight.Input) { in.ControlPlane = preflight.ParseReadyz(200, "ok") }),
			preflight.Fail, []string{"etcd"}},
	})
}

func TestDiskSpace(t *testing.T) {
	runTable(t, preflight.IDDiskSpace, []checkCase{
		{"enough everywhere", goodInput(), preflight.Pass, []string{"2.0 GiB"}},
		{"below the default minimum", with(func(in *preflight.Input) {
			setHost(in, "w-1", func(h *preflight.HostCheck) { h.FreeBytes["/usr/local/bin"] = 1 << 30 })
		}), preflight.Fail, []string{"w-1", "/usr/local/bin has 1.0 GiB free, needs 2.0 GiB"}},
		{"below what the agent requires", with(func(in *preflight.Input) {
			setHost(in, "w-2", func(h *preflight.HostCheck) { h.RequiredBytes = 9 << 30 })
		}), preflight.Fail, []string{"w-2", "/usr/local/bin has 8.0 GiB free, needs 9.0 GiB"}},
		{"configured minimum", with(func(in *preflight.Input) { in.MinFreeBytes = 512 << 20 }), preflight.Pass, []string{"512.0 MiB"}},
		{"no free space reported", with(func(in *preflight.Input) {
			setHost(in, "cp-1", func(h *preflight.HostCheck) { h.FreeBytes = nil })
		}), preflight.Fail, []string{"no free disk space report", "cp-1"}},
	})
}

func TestNetworkReachability(t *testing.T) {
	runTable(t, preflight.IDNetworkReachability, []checkCase{
		{"all reachable", goodInput(), preflight.Pass, []string{"all 3 hosts reached what they probed", "up to 8 peer agents each"}},
		{"API endpoint unreachable", with(func(in *preflight.Input) {
			setHost(in, "w-2", func(h *preflight.HostCheck) {
				h.Unreachable = map[string]string{"10.0.0.1:6443": "i/o timeout"}
				h.ProbeMessage = "1 of 3 peers unreachable"
			})
		}), preflight.Fail, []string{"w-2", "10.0.0.1:6443 (i/o timeout)"}},
		{"probe failed without details", with(func(in *preflight.Input) {
			setHost(in, "w-1", func(h *preflight.HostCheck) { h.ProbeMessage = "invalid operation" })
		}), preflight.Fail, []string{"w-1 (invalid operation)"}},
		{"not probed", with(func(in *preflight.Input) {
			setHost(in, "w-1", func(h *preflight.HostCheck) { h.PeersProbed = false })
		}), preflight.Fail, []string{"no reachability probe report", "w-1"}},
	})
}

func TestPDBsBlockingDrain(t *testing.T) {
	r := runCheck(t, preflight.IDPDBsBlockingDrain, checkCase{in: goodInput(), status: preflight.Pass})
	require.Empty(t, r.Data)
	r = runCheck(t, preflight.IDPDBsBlockingDrain, checkCase{
		in: with(func(in *preflight.Input) {
			in.BlockingPDBs = []preflight.PDBInfo{{Namespace: "db", Name: "pg", Nodes: []string{"w-1", "w-2"}, Pods: []string{"pg-0", "pg-1"}}}
		}),
		status: preflight.Warn, contains: []string{"db/pg"},
	})
	require.Equal(t, "nodes w-1,w-2", r.Data["db/pg"])
	require.False(t, r.Blocks)
}

func TestProtectedPods(t *testing.T) {
	runCheck(t, preflight.IDProtectedPods, checkCase{in: goodInput(), status: preflight.Pass})
	r := runCheck(t, preflight.IDProtectedPods, checkCase{
		in: with(func(in *preflight.Input) {
			in.ProtectedPods = []preflight.ProtectedPod{{Namespace: "ml", Name: "train-0", Node: "w-1", EvictableAt: now.Add(48 * time.Hour)}}
		}),
		status: preflight.Warn, contains: []string{"ml/train-0 on w-1 until 2026-11-24T05:00:00Z"},
	})
	require.False(t, r.Blocks)
}

func TestRunAllPassOnGoodInput(t *testing.T) {
	rep := preflight.Run(goodInput())
	require.Equal(t, preflight.Passed, rep.Verdict)
	require.Empty(t, rep.Failed)
	require.Len(t, rep.Results, len(preflight.Checks()))
	for _, r := range rep.Results {
		require.Equal(t, preflight.Pass, r.Status, "%s: %s", r.Check, r.Message)
	}
}

func TestRegistry(t *testing.T) {
	ids := map[string]preflight.Severity{}
	for _, c := range preflight.Checks() {
		require.NotEmpty(t, c.Description)
		require.NotNil(t, c.Run)
		_, dup := ids[c.ID]
		require.False(t, dup, c.ID)
		ids[c.ID] = c.Severity
	}
	require.Equal(t, map[string]preflight.Severity{
		"version-rules": preflight.Blocking, "release-in-catalog": preflight.Blocking, "artifacts": preflight.Blocking,
		"nodes-ready": preflight.Blocking, "agents-reporting": preflight.Blocking, "control-plane-health": preflight.Blocking,
		"disk-space": preflight.Blocking, "network-reachability": preflight.Blocking,
		"pdbs-blocking-drain": preflight.Warning, "protected-pods": preflight.Warning, "deprecated-apis": preflight.Warning,
	}, ids)
}

func TestRunOnlyUnknownCheck(t *testing.T) {
	_, err := preflight.RunOnly(goodInput(), preflight.IDNodesReady, "no-such-check")
	require.ErrorIs(t, err, preflight.ErrUnknownCheck)
}

func TestDeprecatedAPIs(t *testing.T) {
	removed34 := func(in *preflight.Input) {
		in.DeprecatedAPIs = append(in.DeprecatedAPIs,
			preflight.DeprecatedAPI{Group: "networking.k8s.io", Version: "v1beta1", Resource: "servicecidrs", RemovedRelease: "1.34"},
			preflight.DeprecatedAPI{Version: "v1", Resource: "componentstatuses"}, // no removal announced
		)
	}
	auto := func(f func(in *preflight.Input)) func(in *preflight.Input) {
		return func(in *preflight.Input) { f(in); in.Automatic = true }
	}
	runTable(t, preflight.IDDeprecatedAPIs, []checkCase{
		{"none removed in the target", goodInput(), preflight.Pass, []string{"1 deprecated API(s) in use, none removed in 1.34"}},
		{"none requested", with(func(in *preflight.Input) { in.DeprecatedAPIs = nil }), preflight.Pass, []string{"no deprecated API"}},
		{"a patch, without the data", with(func(in *preflight.Input) {
			in.Target = v("1.33.5")
			delete(in.Gathered, preflight.SourceDeprecatedAPIs)
		}),
			preflight.Pass, []string{"patch"}},
		{"removed in the target", with(removed34), preflight.Fail, []string{"1 deprecated API is in use, removed in 1.34: networking.k8s.io/v1beta1/servicecidrs"}},
		{"removed before the target", with(func(in *preflight.Input) { removed34(in); in.Current, in.Target = v("1.34.2"), v("1.35.0") }),
			preflight.Fail, []string{"networking.k8s.io/v1beta1/servicecidrs", "flowcontrol.apiserver.k8s.io/v1beta3/flowschemas"}},
	})
	manual := runCheck(t, preflight.IDDeprecatedAPIs, checkCase{in: with(removed34), status: preflight.Fail})
	require.Equal(t, preflight.Warning, manual.Severity)
	require.False(t, manual.Blocks, "an operator is warned")
	require.Equal(t, map[string]string{"networking.k8s.io/v1beta1/servicecidrs": "removed in 1.34"}, manual.Data)
	automatic := runCheck(t, preflight.IDDeprecatedAPIs, checkCase{in: with(auto(removed34)), status: preflight.Fail})
	require.Equal(t, preflight.Blocking, automatic.Severity)
	require.True(t, automatic.Blocks, "an automatic minor upgrade is blocked")
	rep := preflight.Run(with(auto(removed34)))
	require.Equal(t, []string{preflight.IDDeprecatedAPIs}, rep.Failed)

	// Automatic, but a patch: nothing is removed, nothing blocks.
	r := runCheck(t, preflight.IDDeprecatedAPIs, checkCase{in: with(auto(func(in *preflight.Input) { removed34(in); in.Target = v("1.33.5") })), status: preflight.Pass})
	require.Equal(t, preflight.Warning, r.Severity)
	// Automatic minor without the data: blocked (missing data never passes).
	r = runCheck(t, preflight.IDDeprecatedAPIs, checkCase{in: with(auto(func(in *preflight.Input) {
		in.SetGathered(preflight.SourceDeprecatedAPIs, errors.New("metrics forbidden"))
	})), status: preflight.Fail, contains: []string{"metrics forbidden"}})
	require.True(t, r.Blocks)
}
