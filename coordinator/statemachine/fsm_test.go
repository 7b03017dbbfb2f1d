package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
	"github.com/moltproject/molt/raftstore"
)

// TestApplyCommands applies each command type to a state prepared from a
// prefix of the golden log, and checks what it changed or that it was
// refused with the right sentinel and changed nothing at all.
func TestApplyCommands(t *testing.T) {
	entries := goldenEntries()
	// before returns the length of the golden log's prefix that ends just
	// before its nth (from 0) command of type typ.
	before := func(typ raftstore.CommandType, nth int) int {
		for i, e := range entries {
			if e.cmd.Type() == typ {
				if nth == 0 {
					return i
				}
				nth--
			}
		}
		t.Fatalf("golden log has too few commands of type %s", typ)
		return 0
	}
	var (
		registered = before(CmdPreflightStart, 0)     // cluster lab, agents, policy
		preflight1 = registered + 1                   // preflight lab-1 running
		cpRunning  = before(CmdNodeStepResult, 0)     // upgrade running, cp-1 at cursor 0
		w1Failed   = before(CmdRetryNode, 0)          // worker-1 failed at its drain
		w1Retried  = w1Failed + 1                     // worker-1 at its drain, attempt 1
		finished   = before(CmdPutRelease, 2)         // upgrade done, lab at 1.34.4
		autoCP     = len(entries)                     // automatic lab-1.34.5-2: pool/cp started, cp-1 protected
		tokens     = before(CmdPutToken, 1)           // operator token op0001 stored
		enrolled   = before(CmdEnrollAgent, 1) + 1    // worker-1 enrolled with bt0001, which is used up
		renewed    = before(CmdRenewAgentCert, 0) + 1 // worker-1 holds certificates 0b and 0d
		trail      = before(CmdAppendAudit, 0)        // the old audit trail holds 5 entries, the log none
		logged     = trail + 1                        // the trail moved into the audit log, then 1 record: seq 6
		up         = "lab-1.34.4-1"                   // the golden upgrade
		// surgeDeleted: cloud's surge node replaced and being deleted.
		surgeDeleted = slices.IndexFunc(entries, func(e goldenEntry) bool {
			c, ok := e.cmd.(NodeStepResultCmd)
			return ok && c.Result.Node == "surge-a-1" && c.Result.Cursor == 4
		})
		now = time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)
		// autoRegistered: cluster auto on channel regular (target 1.34.5),
		// no upgrade; autoStarted: its automatic upgrade in preflight;
		// autoRefused: refused by its preflight, not recorded yet.
		autoRegistered = before(CmdAutoStart, 0)
		autoStarted    = autoRegistered + 1
		autoRefused    = before(CmdAutoRecord, 0)
		autoStart      = func(seq int, edit func(*AutoStartCmd)) AutoStartCmd {
			c := AutoStartCmd{Cluster: "auto", To: phases.MustParseVersion("1.34.5"), Kind: maintenance.KindPatch, Seq: seq, Reason: "why", Now: now,
				Preflight: &PreflightRun{ID: "auto-9", Cluster: "auto", Target: phases.MustParseVersion("1.34.5"), CreatedAt: now, Deadline: now.Add(time.Minute)}}
			if edit != nil {
				edit(&c)
			}
			return c
		}
		v          = phases.MustParseVersion
		node       = func(st *state, name string) phases.NodeTask { n, _ := st.Clusters["lab"].Upgrade.Node(name); return *n }
		nodeResult = func(node string, cursor, attempt int) NodeStepResultCmd {
			return NodeStepResultCmd{Cluster: "lab", Now: now, Result: phases.NodeStepResult{Upgrade: up, Node: node, Cursor: cursor, Attempt: attempt, OK: true}}
		}
	)
	tests := []struct {
		name  string
		at    int // golden log prefix the state is built from
		cmd   Command
		want  error                    // refusal sentinel; nil: applied
		check func(*testing.T, *state) // after an applied command
	}{
		{"put release", registered, PutReleaseCmd{Release: api.Release{Version: "v1.35.0"}, Now: now}, nil,
			func(t *testing.T, st *state) {
				require.Equal(t, "1.35.0", st.Releases["1.35.0"].Version, "stored under its canonical version")
			}},
		{"put release with a bad version", registered, PutReleaseCmd{Release: api.Release{Version: "1.x"}, Now: now}, ErrInvalid, nil},
		{"put user cluster of an unknown admin", registered, PutClusterCmd{Now: now, Spec: phases.ClusterSpec{Name: "u1", Kind: phases.KindUser, AdminCluster: "nope", Version: v("1.33.6"),
			Pools: []phases.Pool{{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: "u1-cp"}}}}}}, ErrInvalid, nil},
		{"re-register moving the version", registered, PutClusterCmd{Now: now, Spec: respec(entries, "1.34.4")}, ErrInvalid, nil},
		{"re-register during an upgrade", cpRunning, PutClusterCmd{Now: now, Spec: respec(entries, "1.33.6")}, ErrUpgradeInProgress, nil},
		{"re-register keeps agents", registered, PutClusterCmd{Now: now, Spec: respec(entries, "1.33.6")}, nil,
			func(t *testing.T, st *state) { require.Len(t, st.Clusters["lab"].Agents, 3) }},
		{"delete an unknown cluster", registered, DeleteClusterCmd{Name: "nope", Now: now}, ErrNotFound, nil},
		{"delete during an upgrade", cpRunning, DeleteClusterCmd{Name: "lab", Now: now}, ErrUpgradeInProgress, nil},
		{"protections only with the start they came with", autoCP, AdvanceCmd{Cluster: "lab", Upgrade: "lab-1.34.5-2", Now: now,
			Actions:     []phases.Action{{ID: "lab-1.34.5-2/start/pool/cp", Kind: phases.ActStartStep, Upgrade: "lab-1.34.5-2", Step: "pool/cp"}},
			Protections: map[string]time.Time{"cp-1": now}}, nil,
			func(t *testing.T, st *state) {
				n, _ := st.Clusters["lab"].Upgrade.Node("cp-1")
				require.NotEqual(t, now, n.ProtectedUntil, "a start refused as stale recorded its protections")
			}},
		{"delete", finished, DeleteClusterCmd{Name: "lab", Now: now}, nil,
			func(t *testing.T, st *state) { require.Empty(t, st.Clusters) }},
		{"upgrade an unknown cluster", registered, StartUpgradeCmd{Cluster: "nope", To: v("1.34.4"), Now: now}, ErrNotFound, nil},
		{"upgrade to a version not in the catalog", registered, StartUpgradeCmd{Cluster: "lab", To: v("1.34.5"), Now: now}, ErrUnknownVersion, nil},
		{"upgrade while one runs", cpRunning, StartUpgradeCmd{Cluster: "lab", To: v("1.34.4"), Now: now}, ErrUpgradeInProgress, nil},
		{"start an upgrade", registered, StartUpgradeCmd{Cluster: "lab", To: v("1.34.4"), Now: now}, nil,
			func(t *testing.T, st *state) {
				r := st.Clusters["lab"]
				require.Equal(t, up, r.Upgrade.ID)
				require.Equal(t, "1.34.4", r.Spec.Version.String(), "spec moves to the target")
				require.Equal(t, "1.33.6", r.StatusVersion.String(), "status moves when it finishes")
			}},
		{"advance another upgrade", cpRunning, AdvanceCmd{Cluster: "lab", Upgrade: "lab-1.34.4-9", Now: now}, phases.ErrStale, nil},
		{"advance with only stale actions", cpRunning, AdvanceCmd{Cluster: "lab", Upgrade: up, Now: now, Actions: []phases.Action{
			{ID: up + "/start/pool/cp", Kind: phases.ActStartStep, Upgrade: up, Step: "pool/cp"}}}, nil,
			nil}, // applied, but its one action is stale: nothing changes
		{"node result for an old cursor", w1Retried, nodeResult("worker-1", 0, 1), phases.ErrStale, nil},
		{"node result for an old attempt", w1Retried, nodeResult("worker-1", 1, 0), phases.ErrStale, nil},
		{"node result of an unknown cluster", cpRunning, NodeStepResultCmd{Cluster: "nope", Result: nodeResult("cp-1", 0, 0).Result}, ErrNotFound, nil},
		{"node result after the upgrade", finished, nodeResult("cp-1", 8, 0), phases.ErrStale, nil},
		{"node result", cpRunning, nodeResult("cp-1", 0, 0), nil,
			func(t *testing.T, st *state) { require.Equal(t, 1, node(st, "cp-1").Cursor) }},
		{"step result for an old attempt", before(CmdStepResult, 3), StepResultCmd{Cluster: "lab", Now: now,
			Result: phases.StepResult{Upgrade: up, Step: "health", Attempt: 0, OK: true}}, phases.ErrStale, nil},
		{"step result of a step not running", cpRunning, StepResultCmd{Cluster: "lab", Now: now,
			Result: phases.StepResult{Upgrade: up, Step: "addons", OK: true}}, phases.ErrStale, nil},
		{"addons applied", before(CmdStepResult, 0), StepResultCmd{Cluster: "lab", Now: now,
			Result: phases.StepResult{Upgrade: up, Step: "addons", OK: true}}, nil,
			func(t *testing.T, st *state) { require.Equal(t, "1.34.4", st.Clusters["lab"].AddonsVersion.String()) }},
		{"pool command without an upgrade", registered, PoolCommandCmd{Cluster: "lab", Pool: "workers", Command: PoolCancel, Now: now}, ErrNoUpgrade, nil},
		{"pool command on an unknown pool", cpRunning, PoolCommandCmd{Cluster: "lab", Pool: "nope", Command: PoolCancel, Now: now}, ErrNotFound, nil},
		{"unknown pool command", cpRunning, PoolCommandCmd{Cluster: "lab", Pool: "workers", Command: "explode", Now: now}, ErrInvalid, nil},
		{"resume a pool not cancelled", cpRunning, PoolCommandCmd{Cluster: "lab", Pool: "workers", Command: PoolResume, Now: now}, ErrCommandNotAllowed, nil},
		{"complete a bare-metal pool", cpRunning, PoolCommandCmd{Cluster: "lab", Pool: "workers", Command: PoolComplete, Now: now}, ErrCommandNotAllowed, nil},
		{"cancel a pool", cpRunning, PoolCommandCmd{Cluster: "lab", Pool: "workers", Command: PoolCancel, Now: now}, nil,
			func(t *testing.T, st *state) {
				p, _ := st.Clusters["lab"].Upgrade.Pool("workers")
				require.True(t, p.Cancelled)
				require.Equal(t, "pool-cancel", st.Audit[len(st.Audit)-1].Action)
			}},
		{"retry a node that did not fail", w1Retried, RetryNodeCmd{Cluster: "lab", Node: "worker-1", Now: now}, ErrCommandNotAllowed, nil},
		{"retry without an upgrade", finished, RetryNodeCmd{Cluster: "lab", Node: "worker-1", Now: now}, ErrNoUpgrade, nil},
		{"retry a failed node", w1Failed, RetryNodeCmd{Cluster: "lab", Node: "worker-1", Now: now}, nil,
			func(t *testing.T, st *state) {
				n := node(st, "worker-1")
				require.Equal(t, phases.StateRunning, n.State)
				require.Equal(t, 1, n.Attempt)
				require.Equal(t, 1, n.Cursor, "again at the step it failed on")
			}},
		{"register an agent of an unknown node", registered, AgentRegisterCmd{Cluster: "lab", Node: "nope", Now: now}, ErrNotFound, nil},
		{"register an agent of an unknown cluster", registered, AgentRegisterCmd{Cluster: "nope", Node: "cp-1", Now: now}, ErrNotFound, nil},
		{"register an agent again", registered, AgentRegisterCmd{Cluster: "lab", Node: "cp-1", Address: "cp-1:8443", Now: now}, nil,
			func(t *testing.T, st *state) {
				a := st.Clusters["lab"].Agents["cp-1"]
				require.Equal(t, "cp-1:8443", a.Address)
				require.Equal(t, now, a.RegisteredAt)
				require.Equal(t, "v1.33.6", a.Kubelet, "component versions stay until the next health change")
			}},
		{"health of an unregistered agent", before(CmdAgentRegister, 0), AgentHealthCmd{Cluster: "lab", Node: "cp-1", Healthy: true, Now: now}, ErrNotFound, nil},
		{"an agent missing keeps its versions", registered, AgentHealthCmd{Cluster: "lab", Node: "cp-1", Missing: true, Kubelet: "ignored", Now: now}, nil,
			func(t *testing.T, st *state) {
				a := st.Clusters["lab"].Agents["cp-1"]
				require.True(t, a.Missing)
				require.Equal(t, "v1.33.6", a.Kubelet)
			}},
		{"protect an unknown node", cpRunning, SetProtectionCmd{Cluster: "lab", Upgrade: up, Node: "nope", Until: now}, phases.ErrStale, nil},
		{"protect in another upgrade", cpRunning, SetProtectionCmd{Cluster: "lab", Upgrade: "lab-1.34.4-9", Node: "cp-1", Until: now}, phases.ErrStale, nil},
		{"protect a node", cpRunning, SetProtectionCmd{Cluster: "lab", Upgrade: up, Node: "worker-2", Until: now}, nil,
			func(t *testing.T, st *state) { require.Equal(t, now, node(st, "worker-2").ProtectedUntil) }},
		{"policy of an unknown cluster", registered, SetPolicyCmd{Cluster: "nope", Now: now}, ErrNotFound, nil},
		{"policy with an unnamed exclusion", registered, SetPolicyCmd{Cluster: "lab", Now: now, Policy: maintenance.Policy{
			Exclusions: []maintenance.Exclusion{{Start: now, End: now.Add(time.Hour)}}}}, ErrPolicyInvalid, nil},
		{"clear the policy", registered, SetPolicyCmd{Cluster: "lab", Now: now}, nil,
			func(t *testing.T, st *state) { require.Nil(t, st.Clusters["lab"].Policy.Window) }},
		{"preflight run that exists", preflight1, PreflightStartCmd{Run: PreflightRun{ID: "lab-1", Cluster: "lab", CreatedAt: now}}, phases.ErrStale, nil},
		{"preflight of an unknown cluster", registered, PreflightStartCmd{Run: PreflightRun{ID: "nope-1", Cluster: "nope", CreatedAt: now}}, ErrNotFound, nil},
		{"preflight result of another node's operation", preflight1, PreflightResultCmd{Cluster: "lab", Run: "lab-1", Node: "cp-1",
			Result: api.OperationResult{ID: "preflight-lab-1-worker-1-peers", State: api.OpSucceeded}}, ErrNotFound, nil},
		{"preflight result after the report", finished, PreflightResultCmd{Cluster: "lab", Run: "lab-1", Node: "cp-1",
			Result: api.OperationResult{ID: "preflight-lab-1-cp-1-peers", State: api.OpFailed}}, phases.ErrStale, nil},
		{"preflight result", preflight1, PreflightResultCmd{Cluster: "lab", Run: "lab-1", Node: "cp-1",
			Result: api.OperationResult{ID: "preflight-lab-1-cp-1-peers", State: api.OpFailed}}, nil,
			func(t *testing.T, st *state) {
				require.Equal(t, api.OpFailed, st.Clusters["lab"].Preflights[0].Results["preflight-lab-1-cp-1-peers"].State)
			}},
		{"put an API token", tokens, PutTokenCmd{Token: TokenRecord{ID: "vw0001", Kind: TokenKindAPI, SecretHash: "aa", Role: "viewer"}, Now: now}, nil,
			func(t *testing.T, st *state) {
				require.Equal(t, "viewer", st.Tokens["vw0001"].Role)
				require.Equal(t, now, st.Tokens["vw0001"].Created)
			}},
		{"put a token with an unknown role", tokens, PutTokenCmd{Token: TokenRecord{ID: "vw0001", Kind: TokenKindAPI, SecretHash: "aa", Role: "root"}, Now: now}, ErrInvalid, nil},
		{"put a token twice", tokens, PutTokenCmd{Token: TokenRecord{ID: "op0001", Kind: TokenKindAPI, SecretHash: "aa", Role: "admin"}, Now: now}, ErrConflict, nil},
		{"put a bootstrap token of a cluster not registered yet", tokens, PutTokenCmd{Token: TokenRecord{ID: "bt0009", Kind: TokenKindBootstrap, SecretHash: "aa", Cluster: "later", Uses: 1, Expires: now.Add(time.Hour)}, Now: now}, nil,
			func(t *testing.T, st *state) { require.Equal(t, "later", st.Tokens["bt0009"].Cluster) }},
		{"put a bootstrap token without a cluster", tokens, PutTokenCmd{Token: TokenRecord{ID: "bt0009", Kind: TokenKindBootstrap, SecretHash: "aa", Uses: 1, Expires: now.Add(time.Hour)}, Now: now}, ErrInvalid, nil},
		{"put a bootstrap token that never expires", tokens, PutTokenCmd{Token: TokenRecord{ID: "bt0009", Kind: TokenKindBootstrap, SecretHash: "aa", Cluster: "lab", Uses: 1}, Now: now}, ErrInvalid, nil},
		{"enroll with an expired token", enrolled - 1, EnrollAgentCmd{TokenID: "bt0001", Cluster: "lab", Node: "worker-1", Serial: "01", Now: now.AddDate(0, 1, 0)}, ErrUnauthenticated, nil},
		{"enroll a node the cluster lacks", enrolled - 1, EnrollAgentCmd{TokenID: "bt0001", Cluster: "lab", Node: "worker-9", Serial: "01", Now: now.AddDate(0, 0, -1)}, ErrForbidden, nil},
		{"enroll with an API token", enrolled - 1, EnrollAgentCmd{TokenID: "op0001", Cluster: "lab", Node: "worker-1", Serial: "01", Now: now}, ErrUnauthenticated, nil},
		{"enroll spends a use", enrolled - 1, EnrollAgentCmd{TokenID: "bt0001", Cluster: "lab", Node: "cp-1", Serial: "01", Now: now.AddDate(0, 0, -1)}, nil,
			func(t *testing.T, st *state) {
				require.Equal(t, 1, st.Tokens["bt0001"].Used)
				require.Equal(t, []string{"01"}, st.Clusters["lab"].AgentCerts["cp-1"])
			}},
		{"a used-up token enrolls no more", enrolled, EnrollAgentCmd{TokenID: "bt0001", Cluster: "lab", Node: "cp-1", Serial: "01", Now: now.AddDate(0, 0, -1)}, ErrUnauthenticated, nil},
		{"renew keeps the two newest certificates", renewed, RenewAgentCertCmd{Cluster: "lab", Node: "worker-1", Old: "0d", Serial: "10", Now: now}, nil,
			func(t *testing.T, st *state) {
				require.Equal(t, []string{"0d", "10"}, st.Clusters["lab"].AgentCerts["worker-1"])
			}},
		{"delete a token", enrolled, DeleteTokenCmd{ID: "op0001", Now: now}, nil,
			func(t *testing.T, st *state) { require.NotContains(t, st.Tokens, "op0001") }},
		{"preflight report twice", finished, PreflightFinishCmd{Cluster: "lab", Run: "lab-1", Now: now}, phases.ErrStale, nil},
		{"preflight report", preflight1, PreflightFinishCmd{Cluster: "lab", Run: "lab-1", Now: now, Report: preflight.Report{Verdict: preflight.Failed}}, nil,
			func(t *testing.T, st *state) {
				run := st.Clusters["lab"].Preflights[0]
				require.Equal(t, "done", run.State)
				require.Equal(t, preflight.Failed, run.Report.Verdict)
				require.Equal(t, now, run.FinishedAt)
			}},
		{"a sealed kubeconfig replaces a plain one", registered, PutClusterCmd{Now: now, Spec: respec(entries, "1.33.6"), KubeconfigSealed: "molt-sealed:v1:k:new"}, nil,
			func(t *testing.T, st *state) {
				r := st.Clusters["lab"]
				require.Equal(t, "molt-sealed:v1:k:new", r.KubeconfigSealed)
				require.Empty(t, r.Kubeconfig, "no plain text left in the state")
			}},
		{"rewrap seals a plain kubeconfig", registered, RewrapSecretsCmd{Now: now, Kubeconfigs: []KubeconfigRewrap{
			{Cluster: "lab", Old: SecretDigest("apiVersion: v1\nkind: Config\n"), Sealed: "molt-sealed:v1:k:lab"}}}, nil,
			func(t *testing.T, st *state) {
				r := st.Clusters["lab"]
				require.Equal(t, "molt-sealed:v1:k:lab", r.KubeconfigSealed)
				require.Empty(t, r.Kubeconfig)
			}},
		{"green created joins the pool", before(CmdPoolWorkResult, 0), PoolWorkResultCmd{Cluster: "cloud", Now: now,
			Result: phases.PoolWorkResult{Upgrade: "cloud-1.34.4-1", Pool: "bg", Work: phases.WorkCreateGreen, Phase: phases.PhaseCreatingGreen, OK: true,
				Green: []phases.GreenGroup{{Zone: "zone-a", Name: "bg-a-g2", Nodes: []string{"bg-a-g2-n1"}}}}}, nil,
			func(t *testing.T, st *state) {
				r := st.Clusters["cloud"]
				p, _ := r.Spec.Pool("bg")
				require.Equal(t, []phases.Node{{Name: "bg-a-1", Zone: "zone-a"}, {Name: "bg-a-g2-n1", Zone: "zone-a"}}, p.Nodes)
				track, _ := r.Upgrade.Pool("bg")
				require.Equal(t, phases.PhaseCordoningBlue, track.BlueGreen.Phase)
			}},
		{"pool work result of another phase", before(CmdPoolWorkResult, 0), PoolWorkResultCmd{Cluster: "cloud", Now: now,
			Result: phases.PoolWorkResult{Upgrade: "cloud-1.34.4-1", Pool: "bg", Work: phases.WorkDeleteBlue, Phase: phases.PhaseDeletingBlue, OK: true}}, phases.ErrStale, nil},
		{"blue deleted leaves the pool to green", before(CmdPoolWorkResult, 3), PoolWorkResultCmd{Cluster: "cloud", Now: now,
			Result: phases.PoolWorkResult{Upgrade: "cloud-1.34.4-1", Pool: "bg", Work: phases.WorkDeleteBlue, Phase: phases.PhaseDeletingBlue, OK: true}}, nil,
			func(t *testing.T, st *state) {
				p, _ := st.Clusters["cloud"].Spec.Pool("bg")
				require.Equal(t, []phases.Node{{Name: "bg-a-g1-n1", Zone: "zone-a"}}, p.Nodes)
				require.Equal(t, []phases.InstanceGroup{{Zone: "zone-a", Name: "bg-a-g1"}}, p.Groups)
			}},
		{"a replaced node leaves the pool to its replacement", surgeDeleted, NodeStepResultCmd{Cluster: "cloud", Now: now,
			Result: phases.NodeStepResult{Upgrade: "cloud-1.34.4-1", Node: "surge-a-1", Cursor: 4, OK: true}}, nil,
			func(t *testing.T, st *state) {
				p, _ := st.Clusters["cloud"].Spec.Pool("surge")
				require.Len(t, p.Nodes, 1)
				require.Equal(t, phases.ReplacementName("surge-a", "cloud-1.34.4-1", "surge-a-1"), p.Nodes[0].Name)
			}},
		{"put a channel", registered, PutChannelCmd{Channel: "stable", AutoUpgradeTarget: v("1.34.4"), Now: now}, nil,
			func(t *testing.T, st *state) {
				require.Equal(t, &ChannelRecord{Name: "stable", AutoUpgradeTarget: v("1.34.4"), UpdatedAt: now}, st.Channels["stable"])
			}},
		{"put a rollout sequence", registered, PutSequenceCmd{Name: "fleet", Stages: []StageRecord{{Name: "dev", Clusters: []string{"lab"}, Soak: time.Hour}}, Now: now}, nil,
			func(t *testing.T, st *state) {
				require.Equal(t, &SequenceRecord{Name: "fleet", Stages: []StageRecord{{Name: "dev", Clusters: []string{"lab"}, Soak: time.Hour}}, UpdatedAt: now}, st.Sequences["fleet"])
			}},
		{"a cluster in two stages of a sequence", registered, PutSequenceCmd{Name: "fleet", Stages: []StageRecord{{Name: "dev", Clusters: []string{"lab"}},
			{Name: "prod", Clusters: []string{"lab"}}}, Now: now}, ErrInvalid, nil},
		{"resume a stage of no sequence", registered, SequenceOverrideCmd{Sequence: "fleet", Stage: "dev", Version: v("1.34.4"), Action: "resume", Now: now}, ErrNotFound, nil},
		{"put an unknown channel", registered, PutChannelCmd{Channel: "edge", Now: now}, ErrInvalid, nil},
		{"record members' capabilities", registered, SetMembersCmd{Members: map[string]api.MemberCapabilities{"m1": {Version: "0.2.0", Command: 42, StepLayout: 3}}, Now: now}, nil,
			func(t *testing.T, st *state) {
				require.Equal(t, map[string]api.MemberCapabilities{"m1": {Version: "0.2.0", Command: 42, StepLayout: 3}}, st.Members)
			}},
		{"a host's new agent reports its release", before(CmdAgentResult, 0), AgentResultCmd{Cluster: "fleet", Now: now,
			Result: phases.AgentResult{Upgrade: "fleet-1.34.6-1", Node: "cp-1", OK: true, Version: "0.2.0"}}, nil,
			func(t *testing.T, st *state) {
				a, _ := st.Clusters["fleet"].Upgrade.Agent("cp-1")
				require.Equal(t, phases.AgentTask{Node: "cp-1", Pool: "cp", From: "0.1.0", State: phases.StateDone,
					StartedAt: a.StartedAt, FinishedAt: now, Version: "0.2.0"}, *a)
			}},
		{"a host whose agent runs another release fails", before(CmdAgentResult, 0), AgentResultCmd{Cluster: "fleet", Now: now,
			Result: phases.AgentResult{Upgrade: "fleet-1.34.6-1", Node: "cp-1", OK: true, Version: "0.1.0"}}, nil,
			func(t *testing.T, st *state) {
				a, _ := st.Clusters["fleet"].Upgrade.Agent("cp-1")
				require.Equal(t, phases.StateFailed, a.State)
				require.Contains(t, a.Error, `runs molt-agent "0.1.0" after the update, not 0.2.0`)
			}},
		{"a result for a host that does not run", before(CmdAgentResult, 0), AgentResultCmd{Cluster: "fleet", Now: now,
			Result: phases.AgentResult{Upgrade: "fleet-1.34.6-1", Node: "worker-1", OK: true, Version: "0.2.0"}}, phases.ErrStale, nil},
		{"record a backup; the retention drops the oldest", registered, BackupCmd{Cluster: "lab", Keep: 2, Now: now, Backup: testBackup("op/2", now.Add(-time.Hour), 20)}, nil,
			func(t *testing.T, st *state) {
				require.Equal(t, []string{"op/2"}, backupIDs(st.Clusters["lab"].Backups))
			}},
		{"a backup without its sum", registered, BackupCmd{Cluster: "lab", Now: now, Backup: func() api.Backup {
			b := testBackup("op/1", now, 10)
			b.SHA256 = ""
			return b
		}()}, ErrInvalid, nil},
		{"agents missing in one entry; an agent no cluster holds passed over", registered, AgentsMissingCmd{Now: now,
			Agents: []AgentRef{{Cluster: "lab", Node: "cp-1"}, {Cluster: "lab", Node: "worker-1"}, {Cluster: "nosuch", Node: "x"}, {Cluster: "lab", Node: "nobody"}}}, nil,
			func(t *testing.T, st *state) {
				for node, a := range st.Clusters["lab"].Agents {
					gone := node == "cp-1" || node == "worker-1"
					require.Equal(t, gone, a.Missing, node)
					if gone {
						require.False(t, a.Healthy, node)
						require.Equal(t, now, a.ChangedAt, node)
					}
				}
			}},
		{"a backup of no cluster", registered, BackupCmd{Cluster: "nosuch", Now: now, Backup: testBackup("op/1", now, 10)}, ErrNotFound, nil},
		{"a member recorded without a version", registered, SetMembersCmd{Members: map[string]api.MemberCapabilities{"m1": {Command: 42}}, Now: now}, ErrInvalid, nil},
		{"put a channel past the catalog", registered, PutChannelCmd{Channel: "rapid", DefaultVersion: v("1.35.0"), Now: now}, ErrUnknownVersion, nil},
		{"start an automatic upgrade", autoRegistered, autoStart(0, nil), nil,
			func(t *testing.T, st *state) {
				r := st.Clusters["auto"]
				require.Equal(t, phases.UpgradePreflight, r.Upgrade.State)
				require.True(t, r.Upgrade.Options.Automatic)
				require.Equal(t, &schedule.Attempt{Upgrade: "auto-1.34.5-1", From: v("1.34.4"), To: v("1.34.5"), Kind: maintenance.KindPatch,
					Reason: "why", StartedAt: now}, r.Auto.Last)
			}},
		{"a second leader's same start", autoStarted, autoStart(0, nil), phases.ErrStale, nil},
		{"a start decided on an older seq", autoRegistered, autoStart(1, nil), phases.ErrStale, nil},
		{"a start of the wrong kind", autoRegistered, autoStart(0, func(c *AutoStartCmd) { c.Kind = maintenance.KindMinor }), phases.ErrStale, nil},
		{"a start past the channel's target", autoRegistered, autoStart(0, func(c *AutoStartCmd) { c.To = v("1.35.0") }), phases.ErrStale, nil},
		{"an end of support not reached", autoRegistered, autoStart(0, func(c *AutoStartCmd) { c.EndOfSupport = true }), phases.ErrStale, nil},
		{"a start over the fleet's limit", autoRegistered, autoStart(0, func(c *AutoStartCmd) { c.Limits.Fleet = 2 }), phases.ErrStale, nil},
		{"record an attempt still in preflight", autoStarted, AutoRecordCmd{Cluster: "auto", Upgrade: "auto-1.34.5-1", Outcome: schedule.OutcomeRefused, Now: now}, phases.ErrStale, nil},
		{"record another outcome", autoRefused, AutoRecordCmd{Cluster: "auto", Upgrade: "auto-1.34.5-1", Outcome: schedule.OutcomeDone, Now: now}, phases.ErrStale, nil},
		{"record a refused attempt", autoRefused, AutoRecordCmd{Cluster: "auto", Upgrade: "auto-1.34.5-1", Outcome: schedule.OutcomeRefused, Now: now}, nil,
			func(t *testing.T, st *state) {
				a := st.Clusters["auto"].Auto
				require.Equal(t, 1, a.Failures)
				require.Equal(t, schedule.OutcomeRefused, a.Last.Outcome)
				require.Equal(t, "preflight failed: nodes-ready", a.Last.Detail)
				require.Equal(t, a.Last.FinishedAt.Add(schedule.BackoffBase), a.NextAttempt)
			}},
		{"rewrap of a changed kubeconfig is stale", registered, RewrapSecretsCmd{Now: now, Kubeconfigs: []KubeconfigRewrap{
			{Cluster: "lab", Old: SecretDigest("an older kubeconfig"), Sealed: "molt-sealed:v1:k:lab"},
			{Cluster: "nope", Old: SecretDigest(""), Sealed: "molt-sealed:v1:k:nope"}}}, nil, nil},
		{"an audit record moves the old trail into the log", trail, AppendAuditCmd{Retention: keepAudit,
			Record: AuditRecord{Time: now, Principal: "token:vw0001", Kind: "operator", Role: "viewer", Method: "DELETE", Path: "/v1/clusters/lab", Status: 403}}, nil,
			func(t *testing.T, st *state) {
				require.Empty(t, st.Audit, "the trail moved")
				require.Len(t, st.AuditLog, 6)
				require.Equal(t, AuditRecord{Seq: 1, Time: time.Date(2026, 11, 2, 9, 13, 0, 0, time.UTC), Cluster: "lab", Action: "maintenance-policy", Detail: "window=true exclusions=0"},
					st.AuditLog[0], "numbered first, in its order, with no index")
				last := st.AuditLog[5]
				require.Equal(t, uint64(6), last.Seq)
				require.Equal(t, uint64(trail+1), last.Index, "the Raft index of the entry that appended it")
				require.Equal(t, "token:vw0001", last.Principal)
				require.Equal(t, uint64(6), st.AuditSeq)
			}},
		{"an audited write applies with its record", logged, wrapAudit(AuditRecord{Time: now, Principal: "token:ad0001", Kind: "operator", Role: "admin", Status: 200},
			PutReleaseCmd{Release: api.Release{Version: "1.35.0"}, Now: now}), nil,
			func(t *testing.T, st *state) {
				require.Contains(t, st.Releases, "1.35.0")
				last := st.AuditLog[len(st.AuditLog)-1]
				require.Equal(t, uint64(7), last.Seq)
				require.Equal(t, uint64(logged+1), last.Index, "the write's own entry")
				require.Equal(t, "token:ad0001", last.Principal)
			}},
		{"an audited write refused leaves no record", logged, wrapAudit(AuditRecord{Time: now, Principal: "token:ad0001", Kind: "operator", Role: "admin", Status: 200},
			PutReleaseCmd{Release: api.Release{Version: "1.x"}, Now: now}), ErrInvalid, nil},
		{"an audited pool command adds no trail entry of its own", cpRunning, wrapAudit(AuditRecord{Time: now, Principal: "token:op0001 (ci)", Kind: "operator", Role: "operator", Status: 200},
			PoolCommandCmd{Cluster: "lab", Pool: "workers", Command: PoolCancel, Now: now}), nil,
			func(t *testing.T, st *state) {
				p, _ := st.Clusters["lab"].Upgrade.Pool("workers")
				require.True(t, p.Cancelled)
				require.Empty(t, st.Audit)
				require.Len(t, st.AuditLog, 2, "the trail's one entry, then the request's record")
				require.Equal(t, "maintenance-policy", st.AuditLog[0].Action)
				require.Equal(t, "token:op0001 (ci)", st.AuditLog[1].Principal)
				require.Empty(t, st.AuditLog[1].Action, "no pool-cancel entry beside the record")
			}},
		{"an agent's record is of the agents' class", renewed, wrapAudit(AuditRecord{Time: now, Principal: "agent:lab/worker-1", Kind: "agent", Status: 200},
			RenewAgentCertCmd{Cluster: "lab", Node: "worker-1", Old: "0d", Serial: "10", Now: now}), nil,
			func(t *testing.T, st *state) {
				require.Equal(t, []string{"0d", "10"}, st.Clusters["lab"].AgentCerts["worker-1"])
				require.Len(t, st.AgentAuditLog, 1)
				require.Equal(t, "agent:lab/worker-1", st.AgentAuditLog[0].Principal)
				require.Len(t, st.AuditLog, 4, "operators' class: the old trail, moved")
			}},
		{"a batch of results records each on its own", preflight1, PreflightResultsCmd{Now: now, Results: []PreflightResultCmd{
			{Cluster: "lab", Run: "lab-1", Node: "cp-1", Result: api.OperationResult{ID: "preflight-lab-1-cp-1-peers", State: api.OpSucceeded}},
			{Cluster: "lab", Run: "lab-1", Node: "cp-1", Result: api.OperationResult{ID: "preflight-lab-1-worker-1-peers", State: api.OpSucceeded}},
		}}, nil,
			func(t *testing.T, st *state) {
				res := st.Clusters["lab"].preflight("lab-1").Results
				require.Len(t, res, 1, "the second is not cp-1's operation")
				require.Contains(t, res, "preflight-lab-1-cp-1-peers")
			}},
		{"a batch whose every result is refused changes nothing", preflight1, PreflightResultsCmd{Now: now, Results: []PreflightResultCmd{
			{Cluster: "lab", Run: "lab-9", Node: "cp-1", Result: api.OperationResult{ID: "preflight-lab-9-cp-1-peers", State: api.OpSucceeded}},
		}}, nil, nil},
	}
	covered := map[raftstore.CommandType]bool{}
	for _, tc := range tests {
		covered[tc.cmd.Type()] = true
		t.Run(tc.name, func(t *testing.T) {
			f, _ := replay(t, encodeEntries(t, entries[:tc.at], 1))
			was, err := f.Snapshot()
			require.NoError(t, err)
			b, err := raftstore.Encode(tc.cmd)
			require.NoError(t, err)
			_, err = f.Handlers()[tc.cmd.Type()](uint64(tc.at+1), b[1:])
			after, snapErr := f.Snapshot()
			require.NoError(t, snapErr)
			if tc.want != nil || tc.check == nil {
				if tc.want != nil {
					require.ErrorIs(t, err, tc.want)
				} else {
					require.NoError(t, err)
				}
				requireSameBytes(t, was, after, "a refused or stale command changes nothing")
				return
			}
			require.NoError(t, err)
			tc.check(t, f.st)
		})
	}
	for _, pc := range pinnedCommands {
		require.True(t, covered[pc.typ], "no apply test for %s", pc.name)
	}
}

// respec is lab's spec from the golden log, stating version.
func respec(entries []goldenEntry, version string) phases.ClusterSpec {
	for _, e := range entries {
		if c, ok := e.cmd.(PutClusterCmd); ok && c.Spec.Name == "lab" {
			c.Spec.Version = phases.MustParseVersion(version)
			return c.Spec
		}
	}
	panic("golden log registers no cluster lab")
}

// After a cancelled upgrade the cluster runs its old version while its
// spec holds the upgrade's target: a spec read back from the API restates
// that target and is accepted (closing the cancelled upgrade), as is the
// version it runs; a third version is refused.
func TestReregisterAfterACancelledUpgradeRestatesEitherVersion(t *testing.T) {
	entries := goldenEntries()
	cpRunning := slices.IndexFunc(entries, func(e goldenEntry) bool { _, ok := e.cmd.(NodeStepResultCmd); return ok })
	require.Positive(t, cpRunning)
	now := time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		version string
		want    error
	}{{"1.34.4", nil}, {"1.33.6", nil}, {"1.34.5", ErrInvalid}} {
		t.Run(tc.version, func(t *testing.T) {
			f, _ := replay(t, encodeEntries(t, entries[:cpRunning], 1))
			r := f.st.Clusters["lab"]
			require.Equal(t, "1.34.4", r.Spec.Version.String(), "the spec holds the upgrade's target")
			require.Equal(t, "1.33.6", r.StatusVersion.String())
			r.Upgrade.State = phases.UpgradeCancelled
			b, err := raftstore.Encode(PutClusterCmd{Now: now, Spec: respec(entries, tc.version)})
			require.NoError(t, err)
			_, err = f.Handlers()[CmdPutCluster](uint64(cpRunning+1), b[1:])
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				require.ErrorContains(t, err, "runs 1.33.6 (desired 1.34.4)")
				return
			}
			require.NoError(t, err)
			require.True(t, f.st.Clusters["lab"].Upgrade.Closed, "the cancelled upgrade is closed")
			require.Equal(t, tc.version, f.st.Clusters["lab"].Spec.Version.String())
		})
	}
}

func testBackup(id string, at time.Time, rev int64) api.Backup {
	return api.Backup{ID: id, Node: "cp-1", Member: "https://10.0.0.11:2379", Revision: rev, Size: 4096,
		SHA256: strings.Repeat("ab", 32), TakenAt: at, Holder: "m1", File: "/var/lib/molt/backups/lab/" + id}
}

func backupIDs(bs []api.Backup) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.ID)
	}
	return out
}

// TestBackupRetention: backups are kept newest first (by time, then by
// revision), the newest Keep stay and the result names what was dropped;
// an operation's upload recorded again changes nothing; a zero retention
// keeps the default, never none.
func TestBackupRetention(t *testing.T) {
	st := newState()
	st.Clusters["lab"] = &ClusterRecord{}
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	apply := func(b api.Backup, keep int) BackupResult {
		t.Helper()
		v, err := st.backup(BackupCmd{Cluster: "lab", Backup: b, Keep: keep, Now: t0})
		require.NoError(t, err)
		return v.(BackupResult)
	}
	for i := range 6 {
		res := apply(testBackup(fmt.Sprintf("op/%d", i), t0.Add(time.Duration(i)*time.Hour), int64(100+i)), 0)
		require.False(t, res.Repeated)
	}
	require.Equal(t, []string{"op/5", "op/4", "op/3", "op/2", "op/1"}, backupIDs(st.Clusters["lab"].Backups), "a zero retention keeps the default 5")
	res := apply(testBackup("op/5", t0, 1), 2)
	require.True(t, res.Repeated, "the same operation is recorded once")
	require.Equal(t, "op/5", res.Backup.ID)
	require.Equal(t, int64(105), res.Backup.Revision, "the first record stands")
	require.Len(t, st.Clusters["lab"].Backups, 5)
	res = apply(testBackup("op/6", t0.Add(5*time.Hour), 106), 2) // same time as op/5, higher revision
	require.Equal(t, []string{"op/6", "op/5"}, backupIDs(st.Clusters["lab"].Backups))
	require.Equal(t, []string{"op/4", "op/3", "op/2", "op/1"}, backupIDs(res.Dropped))
}
