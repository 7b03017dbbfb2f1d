package statemachine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
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
	"github.com/moltproject/molt/raftstore/command"
)

// Golden files pin the coordinator's replicated state as a format that
// outlives releases (testdata/):
//
//   - commands/<number>-<name>.golden: the exact bytes raftstore writes for
//     one command of each type (type byte, then the JSON body).
//   - golden.log: a realistic log, one entry per line, see goldenLogHeader.
//   - golden.snapshot: the snapshot of the state golden.log leads to.
//
// `go test ./coordinator/statemachine -run Golden -update` regenerates them. Regenerating
// is for adding, never for changing what is old: a new command type gets a
// new golden file, new entries are appended to goldenEntries (and so to
// golden.log; -update keeps the checked-in entries byte for byte and refuses
// to drop any). A command body may gain a field, which changes its golden
// file; the log's old lines stay as they are, since logs on disk keep the
// old bytes. Old logs must keep applying to the same state in every later
// release: a diff of golden.snapshot that is not the effect of appended
// entries (or of a new state field that old entries leave empty) is a
// broken format, not a golden file to regenerate.
var update = flag.Bool("update", false, "regenerate golden files under testdata/")

// preflightTimeout is the deadline the leader gave preflight runs
// (coordinator.PreflightTimeout) when the golden log was written; a literal,
// like every entry.
const preflightTimeout = 2 * time.Minute

const (
	goldenLogPath      = "testdata/golden.log"
	goldenSnapshotPath = "testdata/golden.snapshot"
)

// goldenLogHeader opens golden.log and documents its framing.
const goldenLogHeader = `# molt coordinator golden log (see golden_test.go); do not edit.
# One Raft entry per line: "<index> <type> <body>", where the entry's bytes
# are the type as one byte followed by the JSON body (json.Marshal output
# never holds a newline). Lines starting with # are comments.
`

// goldenEntry is one command of the golden log and how it must come out:
// refused is nil for an applied command, or the sentinel of its refusal.
type goldenEntry struct {
	cmd     Command
	refused error
}

// goldenEntries is the golden log's content: a cluster registered with its
// releases, agents and maintenance policy, a preflight run, and a manual
// upgrade to the next minor through to its end, with the refusals a real
// log holds (late results, a stale retry, an unknown cluster). Every entry
// is written out here, none is computed by the engine (phases.Decide,
// preflight.HostOperations), so the entries stay put when the engine
// changes. Append only: see the comment on update.
func goldenEntries() []goldenEntry {
	t := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { t = t.Add(time.Minute); return t }
	var out []goldenEntry
	add := func(cmd Command) { out = append(out, goldenEntry{cmd: cmd}) }
	refuse := func(err error, cmd Command) {
		out = append(out, goldenEntry{cmd: cmd, refused: err})
	}

	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	rel := func(v string) api.Release {
		return api.Release{Version: v, EndOfSupport: time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC), Channels: []string{"regular"},
			Components: api.ReleaseComponents{
				Kubelet:    api.BinaryArtifact{URL: "http://artifacts.test/kubelet-" + v, SHA256: sum},
				Containerd: api.BinaryArtifact{URL: "http://artifacts.test/containerd-" + v, SHA256: sum, Version: "1.7.0"},
				StaticPods: map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v" + v},
			}}
	}
	spec := func(name string) phases.ClusterSpec {
		return phases.ClusterSpec{Name: name, Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.33.6"),
			Pools: []phases.Pool{
				{Name: "cp", Role: phases.RoleControlPlane, Backing: phases.BackingBareMetal, Nodes: []phases.Node{{Name: "cp-1", Address: "10.0.0.11"}}},
				{Name: "workers", Role: phases.RoleWorker, Backing: phases.BackingBareMetal,
					Nodes: []phases.Node{{Name: "worker-1", Address: "10.0.0.21"}, {Name: "worker-2", Address: "10.0.0.22"}}},
			}}
	}
	nodes := []string{"cp-1", "worker-1", "worker-2"}

	// Catalog, clusters, agents, policy.
	add(PutReleaseCmd{Release: rel("1.33.6"), Now: now()})
	add(PutReleaseCmd{Release: rel("1.34.4"), Now: now()})
	add(PutClusterCmd{Spec: spec("lab"), Kubeconfig: "apiVersion: v1\nkind: Config\n", Now: now()})
	add(PutClusterCmd{Spec: spec("scratch"), Now: now()})
	add(DeleteClusterCmd{Name: "scratch", Now: now()})
	for _, n := range nodes {
		add(AgentRegisterCmd{Cluster: "lab", Node: n, Address: n + ":7443", Now: now()})
	}
	for _, n := range nodes {
		add(AgentHealthCmd{Cluster: "lab", Node: n, Healthy: true, Kubelet: "v1.33.6", Containerd: "1.7.0", Now: now()})
	}
	refuse(ErrNotFound, AgentHealthCmd{Cluster: "scratch", Node: "cp-1", Healthy: true, Now: now()})
	add(SetPolicyCmd{Cluster: "lab", Policy: maintenance.Policy{Window: &maintenance.Window{
		Start: time.Date(2026, 11, 1, 1, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC), Recurrence: "FREQ=DAILY",
	}}, Now: now()})

	// A preflight run: every host checks artifacts and probes its peers.
	pfStart := now()
	ops := map[string][]api.Operation{}
	for _, n := range nodes {
		var peers []string
		for _, p := range nodes {
			if p != n {
				peers = append(peers, p+":7443")
			}
		}
		ops[n] = []api.Operation{
			{ID: "preflight-lab-1-" + n + "-artifacts", Kind: api.OpCheckArtifacts, CheckArtifacts: &api.CheckArtifacts{Artifacts: []api.Artifact{
				{Name: "kubelet", URL: "http://artifacts.test/kubelet-1.34.4", SHA256: sum},
				{Name: "containerd", URL: "http://artifacts.test/containerd-1.34.4", SHA256: sum},
			}}},
			{ID: "preflight-lab-1-" + n + "-peers", Kind: api.OpProbePeers, ProbePeers: &api.ProbePeers{Addresses: peers}},
		}
	}
	add(PreflightStartCmd{Run: PreflightRun{ID: "lab-1", Cluster: "lab", Target: phases.MustParseVersion("1.34.4"),
		CreatedAt: pfStart, Deadline: pfStart.Add(preflightTimeout), Operations: ops}})
	for _, n := range nodes {
		for _, op := range ops[n] {
			fin := now()
			add(PreflightResultCmd{Cluster: "lab", Run: "lab-1", Node: n, Result: api.OperationResult{
				ID: op.ID, Kind: op.Kind, State: api.OpSucceeded, Message: "ok", StartedAt: fin.Add(-30 * time.Second), FinishedAt: fin,
				Details: map[string]string{"checked": "true"}}})
		}
	}
	refuse(phases.ErrStale, PreflightResultCmd{Cluster: "lab", Run: "lab-1", Node: "cp-1",
		Result: api.OperationResult{ID: "preflight-lab-1-cp-1-peers", Kind: api.OpProbePeers, State: api.OpSucceeded}})
	add(PreflightFinishCmd{Cluster: "lab", Run: "lab-1", Now: now(), Report: preflight.Report{Verdict: preflight.PassedWithWarnings,
		Results: []preflight.Result{
			{Check: preflight.IDAgentsReporting, Severity: preflight.Blocking, Status: preflight.Pass, Message: "3 of 3 agents report"},
			{Check: preflight.IDPDBsBlockingDrain, Severity: preflight.Warning, Status: preflight.Warn, Message: "pdb web/frontend allows no disruption",
				Data: map[string]string{"worker-1": "web/frontend"}},
		}}})

	// A manual upgrade to 1.34.4.
	const up = "lab-1.34.4-1"
	advance := func(acts ...phases.Action) {
		add(AdvanceCmd{Cluster: "lab", Upgrade: up, Actions: acts, Now: now()})
	}
	startStep := func(step string) phases.Action {
		return phases.Action{ID: up + "/start/" + step, Kind: phases.ActStartStep, Upgrade: up, Step: step}
	}
	completeStep := func(step string) phases.Action {
		return phases.Action{ID: up + "/complete/" + step, Kind: phases.ActCompleteStep, Upgrade: up, Step: step}
	}
	startNode := func(pool, node string, attempt int) phases.Action {
		return phases.Action{ID: fmt.Sprintf("%s/%s/start/a%d", up, node, attempt), Kind: phases.ActStartNode, Upgrade: up, Pool: pool, Node: node, Attempt: attempt}
	}
	nodeResult := func(node string, cursor, attempt int, ok bool, msg string) NodeStepResultCmd {
		return NodeStepResultCmd{Cluster: "lab", Now: now(), Result: phases.NodeStepResult{Upgrade: up, Node: node, Cursor: cursor, Attempt: attempt, OK: ok, Message: msg}}
	}
	nodeSteps := func(node string, from, to, attempt int) {
		for c := from; c < to; c++ {
			add(nodeResult(node, c, attempt, true, ""))
		}
	}
	// The node steps this upgrade recorded for its pools (bare metal in this
	// release): literal, so that the entries stay what they are when the
	// engine's step lists change; the upgrade in the state keeps its own.
	const cpSteps, workerSteps = 8, 7

	add(StartUpgradeCmd{Cluster: "lab", To: phases.MustParseVersion("1.34.4"), Options: phases.Options{ConcurrentWorkerPools: 1}, Now: now()})
	advance(startStep("pool/cp"))
	advance(startNode("cp", "cp-1", 0))
	add(nodeResult("cp-1", 0, 0, true, "cordoned"))
	drain := nodeResult("cp-1", 1, 0, true, "")
	drain.Result.LeftBehind = []phases.LeftPod{{Namespace: "kube-system", Name: "metrics-agent-x7", Reason: "terminating"}}
	add(drain)
	refuse(phases.ErrStale, nodeResult("cp-1", 1, 0, true, "")) // the same result again
	nodeSteps("cp-1", 2, cpSteps, 0)
	advance(completeStep("pool/cp"), startStep("pool/cp"), startStep("addons"), startStep("lifecycle")) // one stale action
	add(StepResultCmd{Cluster: "lab", Result: phases.StepResult{Upgrade: up, Step: "addons", OK: true, Message: "applied"}, Now: now()})
	add(StepResultCmd{Cluster: "lab", Result: phases.StepResult{Upgrade: up, Step: "lifecycle", OK: true}, Now: now()})
	add(SetProtectionCmd{Cluster: "lab", Upgrade: up, Node: "worker-2", Until: t.Add(20 * time.Minute)})
	advance(startStep("pool/workers"), startNode("workers", "worker-1", 0))
	add(PoolCommandCmd{Cluster: "lab", Pool: "workers", Command: PoolCancel, Now: now()})
	add(PoolCommandCmd{Cluster: "lab", Pool: "workers", Command: PoolResume, Now: now()})
	refuse(ErrCommandNotAllowed, PoolCommandCmd{Cluster: "lab", Pool: "workers", Command: PoolRollback, Now: now()})
	add(nodeResult("worker-1", 0, 0, true, ""))
	add(nodeResult("worker-1", 1, 0, false, "pdb web/frontend: eviction refused until deadline"))
	add(RetryNodeCmd{Cluster: "lab", Node: "worker-1", Now: now()})
	refuse(phases.ErrStale, nodeResult("worker-1", 1, 0, true, "")) // the superseded attempt
	refuse(ErrCommandNotAllowed, RetryNodeCmd{Cluster: "lab", Node: "worker-1", Now: now()})
	nodeSteps("worker-1", 1, workerSteps, 1)
	advance(phases.Action{ID: up + "/pause/MAINTENANCE_WINDOW", Kind: phases.ActPause, Upgrade: up, Reason: "MAINTENANCE_WINDOW"})
	advance(phases.Action{ID: up + "/resume", Kind: phases.ActResume, Upgrade: up})
	add(SetProtectionCmd{Cluster: "lab", Upgrade: up, Node: "worker-2"})
	advance(startNode("workers", "worker-2", 0))
	nodeSteps("worker-2", 0, workerSteps, 0)
	advance(completeStep("pool/workers"), startStep("health"))
	add(StepResultCmd{Cluster: "lab", Result: phases.StepResult{Upgrade: up, Step: "health", OK: false, Message: "kube-apiserver /readyz: etcd not ready"}, Now: now()})
	add(StepResultCmd{Cluster: "lab", Result: phases.StepResult{Upgrade: up, Step: "health", Attempt: 1, OK: true, Message: "healthy"}, Now: now()})
	advance(phases.Action{ID: up + "/finish", Kind: phases.ActFinish, Upgrade: up})
	add(AgentHealthCmd{Cluster: "lab", Node: "cp-1", Healthy: true, Kubelet: "v1.34.4", Containerd: "1.7.0", Now: now()})
	add(AgentHealthCmd{Cluster: "lab", Node: "worker-2", Missing: true, Now: now()})

	// An automatic patch: the pool starts with its protections in the same
	// entry (AdvanceCmd.Protections); a name outside the pool is ignored.
	add(PutReleaseCmd{Release: rel("1.34.5"), Now: now()})
	add(StartUpgradeCmd{Cluster: "lab", To: phases.MustParseVersion("1.34.5"), Options: phases.Options{Automatic: true, ConcurrentWorkerPools: 1}, Now: now()})
	const auto = "lab-1.34.5-2"
	add(AdvanceCmd{Cluster: "lab", Upgrade: auto, Now: now(),
		Actions:     []phases.Action{{ID: auto + "/start/pool/cp", Kind: phases.ActStartStep, Upgrade: auto, Step: "pool/cp"}},
		Protections: map[string]time.Time{"cp-1": t.Add(7 * 24 * time.Hour), "worker-1": t.Add(time.Hour)}})

	// Preflight as the upgrade's first step: the upgrade and its run start
	// in one entry; the report's entry refuses it (a blocking check) or
	// moves it to running and sets spec.version.
	add(PutClusterCmd{Spec: spec("edge"), Now: now()})
	edgeRun := func(id string) *PreflightRun {
		at := now()
		return &PreflightRun{ID: id, Cluster: "edge", Target: phases.MustParseVersion("1.34.4"), CreatedAt: at, Deadline: at.Add(preflightTimeout),
			Operations: map[string][]api.Operation{"cp-1": {{ID: "preflight-" + id + "-cp-1-artifacts", Kind: api.OpCheckArtifacts,
				CheckArtifacts: &api.CheckArtifacts{Artifacts: []api.Artifact{{Name: "kubelet", URL: "http://artifacts.test/kubelet-1.34.4", SHA256: sum}}}}}}}
	}
	add(StartUpgradeCmd{Cluster: "edge", To: phases.MustParseVersion("1.34.4"), Now: now(), Preflight: edgeRun("edge-1")})
	refuse(ErrUpgradeInProgress, StartUpgradeCmd{Cluster: "edge", To: phases.MustParseVersion("1.34.4"), Now: now(), Preflight: edgeRun("edge-9")})
	add(PreflightFinishCmd{Cluster: "edge", Run: "edge-1", Now: now(), Report: preflight.Report{Verdict: preflight.Failed,
		Failed:  []string{preflight.IDAgentsReporting},
		Results: []preflight.Result{{Check: preflight.IDAgentsReporting, Severity: preflight.Blocking, Status: preflight.Fail, Blocks: true, Message: "0 of 3 agents report"}}}})
	add(StartUpgradeCmd{Cluster: "edge", To: phases.MustParseVersion("1.34.4"), Now: now(), Preflight: edgeRun("edge-2")})
	add(PreflightFinishCmd{Cluster: "edge", Run: "edge-2", Now: now(), Report: preflight.Report{Verdict: preflight.Passed,
		Results: []preflight.Result{{Check: preflight.IDAgentsReporting, Severity: preflight.Blocking, Status: preflight.Pass, Message: "3 of 3 agents report"}}}})

	// Credentials: an operator's token, a bootstrap token that enrolls one
	// agent and is then used up, a renewal, a revocation by removing the
	// node from the spec, and refusals (wrong cluster, unknown token).
	add(PutTokenCmd{Token: TokenRecord{ID: "op0001", Kind: TokenKindAPI, SecretHash: "5e", Role: "operator", Description: "ci", CreatedBy: "admin"}, Now: now()})
	add(PutTokenCmd{Token: TokenRecord{ID: "bt0001", Kind: TokenKindBootstrap, SecretHash: "6f", Cluster: "lab", Uses: 1, Expires: t.Add(24 * time.Hour), CreatedBy: "op0001"}, Now: now()})
	refuse(ErrForbidden, EnrollAgentCmd{TokenID: "bt0001", Cluster: "edge", Node: "cp-1", Serial: "0a", Now: now()})
	add(EnrollAgentCmd{TokenID: "bt0001", Cluster: "lab", Node: "worker-1", Serial: "0b", Now: now()})
	refuse(ErrUnauthenticated, EnrollAgentCmd{TokenID: "bt0001", Cluster: "lab", Node: "worker-2", Serial: "0c", Now: now()})
	add(RenewAgentCertCmd{Cluster: "lab", Node: "worker-1", Old: "0b", Serial: "0d", Now: now()})
	refuse(ErrUnauthenticated, RenewAgentCertCmd{Cluster: "lab", Node: "worker-1", Old: "ff", Serial: "0e", Now: now()})
	add(DeleteTokenCmd{ID: "bt0001", Now: now()})
	refuse(ErrNotFound, DeleteTokenCmd{ID: "bt0001", Now: now()})

	// Secrets at rest: a kubeconfig arrives sealed; a rewrap seals it
	// again under a new key, seals lab's plain-text kubeconfig from before
	// sealing, and finds edge's replacement stale (edge has none). The
	// digests are SecretDigest of the values replaced.
	const (
		vaultSealed    = "molt-sealed:v1:k-golden1:DOKqjs6TzDRYR48dCfLQgwWPj3kjrptY56uswNDvzVR-FTqMNp6IxH85FXcoy2MSxbAQ-CyvMyMicw8ksEE6qg"
		vaultRewrapped = "molt-sealed:v1:k-golden2:00gSUFE618wxriOKOsxztBNriinz9gMknPSiRYmEkqdKF0oPI1vnyx767etXsqGhXL19d3E4xFDWuWa-_fgT4Q"
		labSealed      = "molt-sealed:v1:k-golden2:JSeJToCb8EYG0U45GQ2Ugo91f62q8BeRxhoHjjW0bqvnskcWuvH5BDYQIXudCNamhlOtOqDZQe8"
	)
	add(PutClusterCmd{Spec: spec("vault"), KubeconfigSealed: vaultSealed, Now: now()})
	add(RewrapSecretsCmd{Now: now(), Kubeconfigs: []KubeconfigRewrap{
		{Cluster: "lab", Old: "5d060abdde881925da9ff44be7c4d582b24352af5bae028ac8717373e12b4fba", Sealed: labSealed},
		{Cluster: "vault", Old: "33190c8d5e750ab61fec913dbb10987965473ace0502af65a4f588cc74d8aa8d", Sealed: vaultRewrapped},
		{Cluster: "edge", Old: "283bb9deef02e6843abfb538efa1eca70801bd8a701c3f98191e123496339247", Sealed: labSealed},
	}})

	// MIG pools (phases.StepLayoutMIG): a surge pool whose node waits for
	// quota, is replaced and leaves the spec to its replacement, and a
	// blue/green pool through its phases (complete refused outside the
	// soak, then given in it) whose groups become green's.
	one := 1
	hour := time.Hour
	add(PutClusterCmd{Now: now(), Spec: phases.ClusterSpec{Name: "cloud", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.33.6"),
		Cloud: &phases.CloudSpec{Provider: phases.CloudGCE, Project: "molt-golden"},
		Pools: []phases.Pool{
			{Name: "cp", Role: phases.RoleControlPlane, Backing: phases.BackingBareMetal, Nodes: []phases.Node{{Name: "cp-1", Address: "10.0.1.11"}}},
			{Name: "surge", Role: phases.RoleWorker, Backing: phases.BackingMIG, Groups: []phases.InstanceGroup{{Zone: "zone-a", Name: "surge-a"}},
				Settings: phases.UpgradeSettings{MaxSurge: &one}, Nodes: []phases.Node{{Name: "surge-a-1", Zone: "zone-a"}}},
			{Name: "bg", Role: phases.RoleWorker, Backing: phases.BackingMIG, Groups: []phases.InstanceGroup{{Zone: "zone-a", Name: "bg-a"}},
				Autoscaling: &phases.Autoscaling{MinNodes: 1, MaxNodes: 3},
				Settings:    phases.UpgradeSettings{Strategy: phases.StrategyBlueGreen, BlueGreen: &phases.BlueGreenSettings{BatchNodeCount: &one, NodePoolSoak: &hour}},
				Nodes:       []phases.Node{{Name: "bg-a-1", Zone: "zone-a"}}},
		}}})
	add(StartUpgradeCmd{Cluster: "cloud", To: phases.MustParseVersion("1.34.4"), Options: phases.Options{ConcurrentWorkerPools: 2, StepLayout: 2}, Now: now()})
	const cu = "cloud-1.34.4-1"
	cadvance := func(acts ...phases.Action) {
		add(AdvanceCmd{Cluster: "cloud", Upgrade: cu, Actions: acts, Now: now()})
	}
	cstep := func(kind phases.ActionKind, verb, step string) phases.Action {
		return phases.Action{ID: cu + "/" + verb + "/" + step, Kind: kind, Upgrade: cu, Step: step}
	}
	cnode := func(node string, cursor, attempt int, ok bool) NodeStepResultCmd {
		return NodeStepResultCmd{Cluster: "cloud", Now: now(), Result: phases.NodeStepResult{Upgrade: cu, Node: node, Cursor: cursor, Attempt: attempt, OK: ok}}
	}
	cwork := func(work string, phase phases.BlueGreenPhase, green []phases.GreenGroup) PoolWorkResultCmd {
		return PoolWorkResultCmd{Cluster: "cloud", Now: now(), Result: phases.PoolWorkResult{Upgrade: cu, Pool: "bg", Work: work, Phase: phase, OK: true, Message: "done", Green: green}}
	}
	cphase := func(to phases.BlueGreenPhase, batch int) phases.Action {
		return phases.Action{ID: fmt.Sprintf("%s/pool/bg/phase/%s/%d", cu, to, batch), Kind: phases.ActPoolPhase, Upgrade: cu, Pool: "bg", Attempt: batch, Phase: string(to)}
	}
	cadvance(cstep(phases.ActStartStep, "start", "pool/cp"))
	cadvance(phases.Action{ID: cu + "/cp-1/start/a0", Kind: phases.ActStartNode, Upgrade: cu, Pool: "cp", Node: "cp-1"})
	for c := range cpSteps {
		add(cnode("cp-1", c, 0, true))
	}
	cadvance(cstep(phases.ActCompleteStep, "complete", "pool/cp"), cstep(phases.ActStartStep, "start", "addons"),
		cstep(phases.ActStartStep, "start", "pool/surge"), cstep(phases.ActStartStep, "start", "pool/bg"))
	add(StepResultCmd{Cluster: "cloud", Result: phases.StepResult{Upgrade: cu, Step: "addons", OK: true, Message: "applied"}, Now: now()})
	// Surge: create the replacement (after a wait for quota), wait for it,
	// cordon, drain and delete the node.
	cadvance(phases.Action{ID: cu + "/surge-a-1/start/a0", Kind: phases.ActStartNode, Upgrade: cu, Pool: "surge", Node: "surge-a-1"})
	wait := cnode("surge-a-1", 0, 0, false)
	wait.Result.Wait, wait.Result.RetryAt = "quota: 0 of 8 instances free in zone-a", t.Add(5*time.Minute)
	add(wait)
	add(cnode("surge-a-1", 0, 0, true))
	refuse(phases.ErrStale, cnode("surge-a-1", 0, 0, true))
	for c := 1; c < 5; c++ {
		add(cnode("surge-a-1", c, 0, true))
	}
	cadvance(cstep(phases.ActCompleteStep, "complete", "pool/surge"))
	// Blue/green.
	add(cwork(phases.WorkCreateGreen, phases.PhaseCreatingGreen, []phases.GreenGroup{{Zone: "zone-a", Name: "bg-a-g1", Nodes: []string{"bg-a-g1-n1"}}}))
	refuse(ErrCommandNotAllowed, PoolCommandCmd{Cluster: "cloud", Pool: "bg", Command: PoolComplete, Now: now()})
	cadvance(phases.Action{ID: cu + "/bg-a-1/start/a0", Kind: phases.ActStartNode, Upgrade: cu, Pool: "bg", Node: "bg-a-1"})
	add(cnode("bg-a-1", 0, 0, true))
	cadvance(cphase(phases.PhaseDrainingBlue, 0))
	cadvance(phases.Action{ID: cu + "/bg-a-1/start/a0/c1", Kind: phases.ActStartNode, Upgrade: cu, Pool: "bg", Node: "bg-a-1", Cursor: 1})
	add(cnode("bg-a-1", 1, 0, true))
	cadvance(cphase(phases.PhaseDrainingBlue, 0))
	cadvance(cphase(phases.PhaseSoaking, 1))
	refuse(phases.ErrStale, cwork(phases.WorkDeleteBlue, phases.PhaseSoaking, nil))
	add(cwork(phases.WorkReleaseGreen, phases.PhaseSoaking, nil))
	add(PoolCommandCmd{Cluster: "cloud", Pool: "bg", Command: PoolComplete, Now: now()})
	cadvance(cphase(phases.PhaseDeletingBlue, 0))
	add(cwork(phases.WorkDeleteBlue, phases.PhaseDeletingBlue, nil))
	cadvance(cstep(phases.ActCompleteStep, "complete", "pool/bg"), cstep(phases.ActStartStep, "start", "health"))
	add(StepResultCmd{Cluster: "cloud", Result: phases.StepResult{Upgrade: cu, Step: "health", OK: true, Message: "healthy"}, Now: now()})
	cadvance(phases.Action{ID: cu + "/finish", Kind: phases.ActFinish, Upgrade: cu})

	// The audit log (audit.go), on a cluster of its own, "ledger": a
	// refusal recorded on its own, which moves the old audit trail into
	// the log; writes carried with their records (an admin's release and
	// cluster, an operator's emergency override whose old trail entry the
	// record replaces, an agent's enrollment and renewal); a write refused
	// when it lands, which leaves no record; and a command applied bare,
	// whose trail entry now goes to the log.
	keep := AuditRetention{MaxEntries: 10000}
	operator := AuditRecord{Principal: "token:op0001 (ci)", Kind: "operator", Role: "operator"}
	admin := AuditRecord{Principal: "token:ad0001 (bootstrap admin)", Kind: "operator", Role: "admin"}
	audited := func(rec AuditRecord, cmd Command) AuditedCmd {
		c, err := NewAudited(rec, keep, cmd)
		if err != nil {
			panic(err)
		}
		return c
	}
	request := func(rec AuditRecord, method, route, path string, status int) AuditRecord {
		rec.Time, rec.Method, rec.Route, rec.Path, rec.Status = now(), method, route, path, status
		return rec
	}
	refused := request(operator, "PUT", "/v1/releases/{version}", "/v1/releases/1.33.7", 403)
	refused.Problem, refused.Rule = "https://molt.dev/problems/forbidden", "role-admin"
	add(AppendAuditCmd{Record: refused, Retention: keep})
	putRel := request(admin, "PUT", "/v1/releases/{version}", "/v1/releases/1.33.7", 200)
	add(audited(putRel, PutReleaseCmd{Release: rel("1.33.7"), Now: putRel.Time}))
	putLedger := request(admin, "PUT", "/v1/clusters/{name}", "/v1/clusters/ledger", 200)
	putLedger.Cluster = "ledger"
	add(audited(putLedger, PutClusterCmd{Spec: spec("ledger"), Now: putLedger.Time}))
	override := request(operator, "POST", "/v1/clusters/{name}/upgrade", "/v1/clusters/ledger/upgrade", 202)
	override.Cluster, override.Reason, override.Detail = "ledger", "CVE-2026-1234 in kubelet", "1.33.6 → 1.33.7, automatic, emergency override"
	ledgerRun := func(id string, at time.Time) *PreflightRun {
		return &PreflightRun{ID: id, Cluster: "ledger", Target: phases.MustParseVersion("1.33.7"), CreatedAt: at, Deadline: at.Add(preflightTimeout),
			Operations: map[string][]api.Operation{"cp-1": {{ID: "preflight-" + id + "-cp-1-artifacts", Kind: api.OpCheckArtifacts,
				CheckArtifacts: &api.CheckArtifacts{Artifacts: []api.Artifact{{Name: "kubelet", URL: "http://artifacts.test/kubelet-1.33.7", SHA256: sum}}}}}}}
	}
	emergency := phases.Options{Automatic: true, EmergencyReason: "CVE-2026-1234 in kubelet", StepLayout: 2}
	add(audited(override, StartUpgradeCmd{Cluster: "ledger", To: phases.MustParseVersion("1.33.7"), Options: emergency,
		Now: override.Time, Preflight: ledgerRun("ledger-1", override.Time)}))
	again := override
	again.Time = now()
	refuse(ErrUpgradeInProgress, audited(again, StartUpgradeCmd{Cluster: "ledger", To: phases.MustParseVersion("1.33.7"), Options: emergency,
		Now: again.Time, Preflight: ledgerRun("ledger-2", again.Time)}))
	putToken := request(admin, "POST", "/v1/tokens", "/v1/tokens", 201)
	putToken.Cluster, putToken.Detail = "ledger", "bootstrap token bt0002, 1 use(s), expires 2026-11-03T09:00:00Z"
	add(audited(putToken, PutTokenCmd{Token: TokenRecord{ID: "bt0002", Kind: TokenKindBootstrap, SecretHash: "7a", Cluster: "ledger",
		Uses: 1, Expires: time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC), CreatedBy: "token:ad0001 (bootstrap admin)"}, Now: putToken.Time}))
	enroll := request(AuditRecord{Principal: "bootstrap-token:bt0002", Kind: "bootstrap"}, "POST", "/v1/agents/enroll", "/v1/agents/enroll", 200)
	enroll.Cluster, enroll.Node, enroll.Detail = "ledger", "worker-1", "certificate serial 1a"
	add(audited(enroll, EnrollAgentCmd{TokenID: "bt0002", Cluster: "ledger", Node: "worker-1", Serial: "1a", Now: enroll.Time}))
	renewal := request(AuditRecord{Principal: "agent:ledger/worker-1", Kind: "agent"}, "POST", "/v1/agents/{cluster}/{node}/certificate", "/v1/agents/ledger/worker-1/certificate", 200)
	renewal.Cluster, renewal.Node, renewal.Detail = "ledger", "worker-1", "certificate serial 1a → 1b"
	add(audited(renewal, RenewAgentCertCmd{Cluster: "ledger", Node: "worker-1", Old: "1a", Serial: "1b", Now: renewal.Time}))
	add(SetPolicyCmd{Cluster: "ledger", Now: now()})
	// Health gates, failure budget and rollback (phases.StepLayoutGates):
	// the control-plane node's gates step waits on a red PromQL gate, then
	// passes; the first worker's kubelet fails, the workers' budget (1)
	// fails the pool, rollback auto takes the worker back and the upgrade
	// ends failed; an operator then rolls the control plane back.
	gates := []phases.HealthGate{{Name: "errors", Expr: "sum(rate(probe_failures_total[1m])) == 0", For: time.Minute, Prometheus: "http://prometheus.test:9090"}}
	add(PutClusterCmd{Now: now(), Spec: phases.ClusterSpec{Name: "gated", Kind: phases.KindStandalone, Version: phases.MustParseVersion("1.33.6"),
		HealthGates: gates,
		Pools: []phases.Pool{
			{Name: "cp", Role: phases.RoleControlPlane, Backing: phases.BackingBareMetal, Nodes: []phases.Node{{Name: "g-cp-1", Address: "10.0.2.11"}}},
			{Name: "workers", Role: phases.RoleWorker, Backing: phases.BackingBareMetal,
				Settings: phases.UpgradeSettings{MaxFailedNodes: &one, Rollback: phases.RollbackAuto},
				Nodes:    []phases.Node{{Name: "g-w-1", Address: "10.0.2.21"}, {Name: "g-w-2", Address: "10.0.2.22"}}},
		}}})
	add(StartUpgradeCmd{Cluster: "gated", To: phases.MustParseVersion("1.34.4"), Now: now(),
		Options: phases.Options{ConcurrentWorkerPools: 1, StepLayout: 3, HealthTimeout: 30 * time.Minute, GateTimeout: 10 * time.Minute}})
	const gu = "gated-1.34.4-1"
	gadvance := func(acts ...phases.Action) {
		add(AdvanceCmd{Cluster: "gated", Upgrade: gu, Actions: acts, Now: now()})
	}
	gstep := func(kind phases.ActionKind, verb, step string) phases.Action {
		return phases.Action{ID: gu + "/" + verb + "/" + step, Kind: kind, Upgrade: gu, Step: step}
	}
	gnode := func(node string, cursor, attempt int, ok bool, msg string) NodeStepResultCmd {
		return NodeStepResultCmd{Cluster: "gated", Now: now(), Result: phases.NodeStepResult{Upgrade: gu, Node: node, Cursor: cursor, Attempt: attempt, OK: ok, Message: msg}}
	}
	gchecks := func(node string, cursor int, red string) NodeStepResultCmd {
		c := gnode(node, cursor, 0, true, "")
		c.Result.RetryAt = t.Add(15 * time.Second)
		c.Result.Gates = []phases.GateCheck{{Name: phases.CheckNodeReady, OK: true}, {Name: phases.CheckAgent, OK: true}, {Name: phases.CheckWorkloads, OK: true},
			{Name: "errors", OK: red == "", Value: "0"}}
		if red != "" {
			c.Result.Gates[3].Value = red
		}
		return c
	}
	gstart := func(pool, node string, attempt, path int, rollback bool) phases.Action {
		a := phases.Action{ID: fmt.Sprintf("%s/%s/start/a%d", gu, node, attempt), Kind: phases.ActStartNode, Upgrade: gu, Pool: pool, Node: node, Attempt: attempt}
		if rollback {
			a.ID, a.Path, a.Rollback = fmt.Sprintf("%s/%s/rollback/start/a%d/p%d", gu, node, attempt+1, path), path, true
		}
		return a
	}
	const gCPSteps, gWorkerFail, gCPBack, gWorkerBack = 9, 4, 7, 6
	gadvance(gstep(phases.ActStartStep, "start", "pool/cp"))
	gadvance(gstart("cp", "g-cp-1", 0, 0, false))
	for c := range gCPSteps - 1 {
		add(gnode("g-cp-1", c, 0, true, ""))
	}
	add(gchecks("g-cp-1", gCPSteps-1, "no result")) // red: waits, holds the pool
	add(gchecks("g-cp-1", gCPSteps-1, ""))          // green: soaks a minute
	add(gchecks("g-cp-1", gCPSteps-1, ""))          // held a minute: passes
	gadvance(gstep(phases.ActCompleteStep, "complete", "pool/cp"), gstep(phases.ActStartStep, "start", "addons"), gstep(phases.ActStartStep, "start", "pool/workers"))
	add(StepResultCmd{Cluster: "gated", Result: phases.StepResult{Upgrade: gu, Step: "addons", OK: true, Message: "applied"}, Now: now()})
	gadvance(gstart("workers", "g-w-1", 0, 0, false))
	add(gnode("g-w-1", 0, 0, true, ""))
	gdrain := gnode("g-w-1", 1, 0, true, "")
	gdrain.Result.Drained = []phases.Workload{{Kind: "Deployment", Namespace: "default", Name: "web"}}
	add(gdrain)
	for c := 2; c < gWorkerFail; c++ {
		add(gnode("g-w-1", c, 0, true, ""))
	}
	add(gnode("g-w-1", gWorkerFail, 0, false, "component not healthy: kubelet after 2m0s; previous binary restored"))
	refuse(ErrCommandNotAllowed, RetryNodeCmd{Cluster: "gated", Node: "g-w-2", Now: now()})
	gadvance(phases.Action{ID: gu + "/fail/workers", Kind: phases.ActFailPool, Upgrade: gu, Pool: "workers"}, gstart("workers", "g-w-2", 0, 0, false)) // nothing new starts: stale
	gadvance(gstart("workers", "g-w-1", 0, phases.PathRollback, true))
	for c := range gWorkerBack {
		add(gnode("g-w-1", c, 1, true, ""))
	}
	gadvance(phases.Action{ID: gu + "/halt/pool/workers/rolledBack", Kind: phases.ActHaltStep, Upgrade: gu, Step: "pool/workers", Reason: "rolledBack"})
	gadvance(phases.Action{ID: gu + "/halt", Kind: phases.ActHalt, Upgrade: gu})
	refuse(ErrNoUpgrade, RetryNodeCmd{Cluster: "gated", Node: "g-w-1", Now: now()})
	refuse(ErrCommandNotAllowed, PoolCommandCmd{Cluster: "gated", Pool: "workers", Command: PoolRollback, Now: now()})
	refuse(ErrCommandNotAllowed, PoolCommandCmd{Cluster: "gated", Pool: "cp", Command: PoolResume, Now: now()})
	add(PoolCommandCmd{Cluster: "gated", Pool: "cp", Command: PoolRollback, Now: now()})
	gadvance(gstart("cp", "g-cp-1", 0, phases.PathRollback, true))
	for c := range gCPBack {
		add(gnode("g-cp-1", c, 1, true, ""))
	}
	gadvance(phases.Action{ID: gu + "/halt/pool/cp/rolledBack", Kind: phases.ActHaltStep, Upgrade: gu, Step: "pool/cp", Reason: "rolledBack"})
	gadvance(phases.Action{ID: gu + "/halt", Kind: phases.ActHalt, Upgrade: gu})
	// Automatic upgrades (auto.go), self-contained: channel regular's
	// target; a cluster on it; the scheduler's start, refused when a second
	// leader repeats it; its preflight refuses it; the outcome recorded
	// (and not twice); a start refused during the backoff and one after it.
	add(PutChannelCmd{Channel: "regular", DefaultVersion: phases.MustParseVersion("1.34.4"), AutoUpgradeTarget: phases.MustParseVersion("1.34.5"), Now: now()})
	refuse(ErrInvalid, PutChannelCmd{Channel: "beta", Now: now()})
	refuse(ErrUnknownVersion, PutChannelCmd{Channel: "stable", AutoUpgradeTarget: phases.MustParseVersion("1.40.0"), Now: now()})
	autoSpec := spec("auto")
	autoSpec.Channel, autoSpec.Version = "regular", phases.MustParseVersion("1.34.4")
	add(PutClusterCmd{Spec: autoSpec, Now: now()})
	autoRun := func(id string) *PreflightRun {
		at := now()
		return &PreflightRun{ID: id, Cluster: "auto", Target: phases.MustParseVersion("1.34.5"), CreatedAt: at, Deadline: at.Add(preflightTimeout),
			Operations: map[string][]api.Operation{"cp-1": {{ID: "preflight-" + id + "-cp-1-artifacts", Kind: api.OpCheckArtifacts,
				CheckArtifacts: &api.CheckArtifacts{Artifacts: []api.Artifact{{Name: "kubelet", URL: "http://artifacts.test/kubelet-1.34.5", SHA256: sum}}}}}}}
	}
	autoStart := func(seq int, run string) AutoStartCmd {
		return AutoStartCmd{Cluster: "auto", To: phases.MustParseVersion("1.34.5"), Kind: maintenance.KindPatch, Seq: seq,
			Reason: "automatic patch upgrade 1.34.4 → 1.34.5: channel regular targets 1.34.5", Limits: schedule.Limits{PerFamily: 1},
			Options: phases.Options{ConcurrentWorkerPools: 1, StepLayout: 2}, Preflight: autoRun(run), Now: now()}
	}
	add(autoStart(0, "auto-1"))
	refuse(phases.ErrStale, autoStart(0, "auto-1"))
	add(PreflightFinishCmd{Cluster: "auto", Run: "auto-1", Now: now(), Report: preflight.Report{Verdict: preflight.Failed,
		Failed:  []string{preflight.IDNodesReady},
		Results: []preflight.Result{{Check: preflight.IDNodesReady, Severity: preflight.Blocking, Status: preflight.Fail, Blocks: true, Message: "1 node not Ready: worker-2"}}}})
	refuse(phases.ErrStale, autoStart(1, "auto-2"))
	add(AutoRecordCmd{Cluster: "auto", Upgrade: "auto-1.34.5-1", Outcome: schedule.OutcomeRefused, Now: now()})
	refuse(phases.ErrStale, AutoRecordCmd{Cluster: "auto", Upgrade: "auto-1.34.5-1", Outcome: schedule.OutcomeRefused, Now: now()})
	refuse(phases.ErrStale, autoStart(1, "auto-2"))
	t = t.Add(schedule.BackoffBase)
	add(autoStart(1, "auto-2"))
	add(PreflightFinishCmd{Cluster: "auto", Run: "auto-2", Now: now(), Report: preflight.Report{Verdict: preflight.Passed,
		Results: []preflight.Result{{Check: preflight.IDNodesReady, Severity: preflight.Blocking, Status: preflight.Pass, Message: "3 of 3 nodes Ready"}}}})
	// The record of members' capabilities (0.2.0, members.go): two
	// members, then one left; a record without a version is refused.
	caps := func(v string) api.MemberCapabilities {
		return api.MemberCapabilities{Version: v, Commit: "0123456789ab", Command: 42, RaftCommand: 2, StateSnapshot: 1, RaftSnapshot: 1, StepLayout: 3}
	}
	add(SetMembersCmd{Members: map[string]api.MemberCapabilities{"m1": caps("0.2.0"), "m2": caps("0.2.0")}, Now: now()})
	refuse(ErrInvalid, SetMembersCmd{Members: map[string]api.MemberCapabilities{"m1": {}}, Now: now()})
	add(SetMembersCmd{Members: map[string]api.MemberCapabilities{"m1": caps("0.2.1")}, Now: now()})
	// A preflight run whose hosts' operations every member derives from
	// its state (0.2.0, preflight_plan.go), and two of its results in one
	// entry with a third refused inside it (preflight_results.go).
	pf := now()
	add(PreflightStartCmd{Run: PreflightRun{ID: "lab-30", Cluster: "lab", Target: phases.MustParseVersion("1.34.4"),
		CreatedAt: pf, Deadline: pf.Add(preflightTimeout), HostPlan: HostPlanRing}})
	fin := now()
	result := func(node, op string) PreflightResultCmd {
		return PreflightResultCmd{Cluster: "lab", Run: "lab-30", Node: node, Result: api.OperationResult{
			ID: "preflight-lab-30-" + node + "-" + op, State: api.OpSucceeded, StartedAt: fin.Add(-time.Second), FinishedAt: fin}}
	}
	add(PreflightResultsCmd{Results: []PreflightResultCmd{result("cp-1", "artifacts"), result("worker-1", "peers"), result("worker-2", "nosuch")}, Now: fin})

	// The molt step (0.2.0, agentupdate.go): a release that names a
	// molt-agent (and one whose agent is refused), an upgrade laid out
	// with a molt step for the two hosts on another agent, one host whose
	// new agent reports (its result repeated: stale), one rolled back,
	// the step failed with its reason and the upgrade halted.
	agentRel := rel("1.34.6")
	agentRel.Agent = &api.AgentArtifact{Version: "0.2.0", URL: "/artifacts/molt-agent-0.2.0", SHA256: sum}
	add(PutReleaseCmd{Release: agentRel, Now: now()})
	badAgent := rel("1.34.7")
	badAgent.Agent = &api.AgentArtifact{Version: "latest", URL: "/artifacts/molt-agent", SHA256: sum}
	refuse(ErrInvalid, PutReleaseCmd{Release: badAgent, Now: now()})
	moltSpec := spec("fleet")
	moltSpec.Version = phases.MustParseVersion("1.34.5")
	add(PutClusterCmd{Spec: moltSpec, Now: now()})
	moltID := "fleet-1.34.6-1"
	add(StartUpgradeCmd{Cluster: "fleet", To: phases.MustParseVersion("1.34.6"), Now: now(),
		Options: phases.Options{ConcurrentWorkerPools: 1, StepLayout: 4, AgentVersion: "0.2.0", AgentTimeout: 5 * time.Minute,
			AgentVersions: map[string]string{"cp-1": "0.1.0", "worker-1": "0.1.0", "worker-2": "0.2.0"}}})
	startAgent := func(pool, node string) phases.Action {
		return phases.Action{ID: moltID + "/molt/" + node + "/start/a0", Kind: phases.ActStartAgent, Upgrade: moltID, Step: "molt", Pool: pool, Node: node}
	}
	add(AdvanceCmd{Cluster: "fleet", Upgrade: moltID, Now: now(), Actions: []phases.Action{
		{ID: moltID + "/start/molt", Kind: phases.ActStartStep, Upgrade: moltID, Step: "molt"}, startAgent("cp", "cp-1")}})
	cpDone := AgentResultCmd{Cluster: "fleet", Result: phases.AgentResult{Upgrade: moltID, Node: "cp-1", OK: true, Version: "0.2.0"}, Now: now()}
	add(cpDone)
	refuse(phases.ErrStale, cpDone)
	add(AdvanceCmd{Cluster: "fleet", Upgrade: moltID, Now: now(), Actions: []phases.Action{startAgent("workers", "worker-1")}})
	add(AgentResultCmd{Cluster: "fleet", Now: now(), Result: phases.AgentResult{Upgrade: moltID, Node: "worker-1", Version: "0.1.0",
		Message: "molt-agent 0.2.0 did not come up: systemd started it 2 times and it stopped each time before it ran; the kept molt-agent 0.1.0 was put back"}})
	add(AdvanceCmd{Cluster: "fleet", Upgrade: moltID, Now: now(), Actions: []phases.Action{
		{ID: moltID + "/fail/molt", Kind: phases.ActFailStep, Upgrade: moltID, Step: "molt"}}})
	add(AdvanceCmd{Cluster: "fleet", Upgrade: moltID, Now: now(), Actions: []phases.Action{
		{ID: moltID + "/halt", Kind: phases.ActHalt, Upgrade: moltID}}})
	// Rollout sequences (0.2.0, sequences.go): a sequence of two stages,
	// one by name, one by labels; another that would take the same
	// cluster is refused; an operator resumes a stage for a version; a
	// sequence stored and deleted.
	add(PutSequenceCmd{Name: "fleet", Stages: []StageRecord{{Name: "canary", Clusters: []string{"auto"}, Soak: 72 * time.Hour},
		{Name: "production", Selector: map[string]string{"tier": "production"}}}, Now: now()})
	refuse(ErrInvalid, PutSequenceCmd{Name: "other", Stages: []StageRecord{{Name: "only", Clusters: []string{"auto"}}}, Now: now()})
	add(SequenceOverrideCmd{Sequence: "fleet", Stage: "canary", Version: phases.MustParseVersion("1.34.5"), Action: schedule.OverrideResume,
		Reason: "the failure was the host's disk, not the release", Now: now()})
	add(PutSequenceCmd{Name: "gone", Stages: []StageRecord{{Name: "only", Clusters: []string{"nobody"}}}, Now: now()})
	add(PutSequenceCmd{Name: "gone", Delete: true, Now: now()})
	// etcd backups (0.2.0, backups.go): a cluster that skips the backup
	// step, a snapshot recorded, the same operation's upload repeated
	// (recorded once), one without a sum refused, and a retention of 1
	// that drops the older.
	skipSpec := spec("external")
	skipSpec.EtcdBackup = phases.EtcdBackupSkip
	add(PutClusterCmd{Spec: skipSpec, Now: now()})
	snap := api.Backup{ID: "fleet-1.34.6-1/run/backup/a0", Upgrade: "fleet-1.34.6-1", Node: "cp-1", Member: "https://10.0.0.11:2379",
		Revision: 4211, Size: 2408480, SHA256: sum, EtcdVersion: "3.6.4", TakenAt: now(), Holder: "m1",
		File: "/var/lib/molt/backups/fleet/4211-20261102T090000Z.db"}
	add(BackupCmd{Cluster: "fleet", Backup: snap, Keep: 5, Now: now()})
	add(BackupCmd{Cluster: "fleet", Backup: snap, Keep: 5, Now: now()})
	bad := snap
	bad.ID, bad.SHA256 = "fleet-1.34.6-1/run/backup/a1", ""
	refuse(ErrInvalid, BackupCmd{Cluster: "fleet", Backup: bad, Now: now()})
	next := snap
	next.ID, next.Revision, next.TakenAt = "fleet-1.34.6-1/run/backup/a2", 4300, now()
	next.File = "/var/lib/molt/backups/fleet/4300-20261102T090500Z.db"
	add(BackupCmd{Cluster: "fleet", Backup: next, Keep: 1, Now: now()})
	// Observed static pods (0.2.0, observed.go): cp-1's images recorded,
	// then a beat that carries none running; the sweep's batch of missing
	// agents (0.2.0, agentsmissing.go), one of them already missing and
	// one of a cluster that does not exist.
	add(AgentHealthCmd{Cluster: "lab", Node: "cp-1", Healthy: true, Kubelet: "v1.34.4", Containerd: "1.7.0", Now: now(),
		StaticPods: map[string]string{"etcd": "registry.k8s.io/etcd:3.6.4-0", "kube-apiserver": "registry.k8s.io/kube-apiserver:v1.34.4"}})
	add(AgentHealthCmd{Cluster: "lab", Node: "cp-1", Healthy: true, Kubelet: "v1.34.4", Containerd: "1.7.0", Now: now(), StaticPods: map[string]string{}})
	add(AgentsMissingCmd{Agents: []AgentRef{{Cluster: "lab", Node: "cp-1"}, {Cluster: "lab", Node: "worker-2"}, {Cluster: "nosuch", Node: "x"}}, Now: now()})
	return out
}

// logEntry is one line of a golden log.
type logEntry struct {
	index uint64
	data  []byte // as raftstore writes it: type byte, JSON body
}

func formatLogLine(e logEntry) string {
	return fmt.Sprintf("%d %d %s\n", e.index, e.data[0], e.data[1:])
}

// readGoldenLog parses a golden log; indexes must increase by one from 1.
func readGoldenLog(t *testing.T, path string) []logEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []logEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		idx, rest, ok1 := strings.Cut(line, " ")
		typ, body, ok2 := strings.Cut(rest, " ")
		require.True(t, ok1 && ok2, "golden log line %q", line)
		i, err := strconv.ParseUint(idx, 10, 64)
		require.NoError(t, err)
		ty, err := strconv.ParseUint(typ, 10, 8)
		require.NoError(t, err)
		require.Equal(t, uint64(len(out)+1), i, "golden log indexes are 1, 2, 3, …")
		out = append(out, logEntry{index: i, data: append([]byte{byte(ty)}, body...)})
	}
	require.NoError(t, sc.Err())
	return out
}

// replay applies entries through a fresh FSM's registry in order, as
// raftstore's FSM does, and returns it with each entry's refusal (nil when
// applied).
func replay(t *testing.T, entries []logEntry) (*Machine, []error) {
	t.Helper()
	f := New()
	handlers := f.Handlers()
	errs := make([]error, len(entries))
	for i, e := range entries {
		typ, body, err := raftstore.Decode(e.data)
		require.NoError(t, err, "entry %d", e.index)
		h, ok := handlers[typ]
		require.True(t, ok, "entry %d: no handler for type %s", e.index, typ)
		_, errs[i] = h(e.index, body)
	}
	return f, errs
}

// encodeEntries frames entries as raftstore does, from index first.
func encodeEntries(t *testing.T, entries []goldenEntry, first uint64) []logEntry {
	t.Helper()
	out := make([]logEntry, len(entries))
	for i, e := range entries {
		b, err := raftstore.Encode(e.cmd)
		require.NoError(t, err)
		out[i] = logEntry{index: first + uint64(i), data: b}
	}
	return out
}

// updateGoldenLog appends the entries of goldenEntries that golden.log
// does not have yet, keeping every checked-in line byte for byte.
func updateGoldenLog(t *testing.T, want []goldenEntry) {
	t.Helper()
	var old []logEntry
	if _, err := os.Stat(goldenLogPath); err == nil {
		old = readGoldenLog(t, goldenLogPath)
	}
	require.LessOrEqual(t, len(old), len(want), "entries are never removed from the golden log")
	var buf strings.Builder
	buf.WriteString(goldenLogHeader)
	for _, e := range append(old, encodeEntries(t, want[len(old):], uint64(len(old))+1)...) {
		buf.WriteString(formatLogLine(e))
	}
	require.NoError(t, os.WriteFile(goldenLogPath, []byte(buf.String()), 0o644))
}

// TestGoldenReplay applies the checked-in log through a fresh FSM: every
// entry is applied or refused as goldenEntries says, and the state it
// leads to snapshots to exactly the checked-in golden snapshot. Restoring
// that snapshot gives the same state, which snapshots to the same bytes.
func TestGoldenReplay(t *testing.T) {
	want := goldenEntries()
	if *update {
		updateGoldenLog(t, want)
	}
	entries := readGoldenLog(t, goldenLogPath)
	require.Len(t, entries, len(want), "golden.log and goldenEntries differ in length: run with -update after appending entries")
	f, errs := replay(t, entries)
	for i, err := range errs {
		if want[i].refused == nil {
			require.NoError(t, err, "entry %d (type %d) must apply", entries[i].index, entries[i].data[0])
		} else {
			require.ErrorIs(t, err, want[i].refused, "entry %d (type %d) must be refused", entries[i].index, entries[i].data[0])
		}
	}
	snap, err := f.Snapshot()
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(goldenSnapshotPath, snap, 0o644))
	}
	golden, err := os.ReadFile(goldenSnapshotPath)
	require.NoError(t, err)
	requireSameBytes(t, golden, snap, "the checked-in log no longer leads to the checked-in state")

	restored := New()
	require.NoError(t, restored.Restore(golden))
	again, err := restored.Snapshot()
	require.NoError(t, err)
	requireSameBytes(t, golden, again, "the golden snapshot restores to the state it holds")
}

// TestGoldenSnapshotAnywhere cuts the golden log at every index: the
// snapshot of the state so far, restored into a fresh FSM that then applies
// the rest of the log, refuses the same entries and ends in the golden
// state. This is what a follower installing a snapshot relies on.
func TestGoldenSnapshotAnywhere(t *testing.T) {
	entries := readGoldenLog(t, goldenLogPath)
	golden, err := os.ReadFile(goldenSnapshotPath)
	require.NoError(t, err)
	_, wantErrs := replay(t, entries)
	for k := range entries {
		head, _ := replay(t, entries[:k])
		snap, err := head.Snapshot()
		require.NoError(t, err)
		f := New()
		require.NoError(t, f.Restore(snap))
		for i, e := range entries[k:] {
			typ, body, err := raftstore.Decode(e.data)
			require.NoError(t, err)
			_, err = f.Handlers()[typ](e.index, body)
			require.Equal(t, wantErrs[k+i] == nil, err == nil, "cut at %d: entry %d refused differently: %v", k, e.index, err)
		}
		end, err := f.Snapshot()
		require.NoError(t, err)
		requireSameBytes(t, golden, end, "cut at %d", k)
	}
}

// TestGoldenCommands pins the bytes of one command of each type: the first
// applied command of that type in goldenEntries, encoded by raftstore,
// must equal testdata/commands/<number>-<name>.golden. The golden bytes
// decode to the same command and are applied by the FSM's handler to the
// state the golden log has just before that command.
func TestGoldenCommands(t *testing.T) {
	entries := goldenEntries()
	for _, pc := range pinnedCommands {
		t.Run(pc.name, func(t *testing.T) {
			at := -1
			for i, e := range entries {
				if e.cmd.Type() == pc.typ && e.refused == nil {
					at = i
					break
				}
			}
			require.NotEqual(t, -1, at, "goldenEntries has no applied %s command: append one", pc.name)
			e := entries[at]
			enc, err := raftstore.Encode(e.cmd)
			require.NoError(t, err)
			path := filepath.Join("testdata", "commands", fmt.Sprintf("%d-%s.golden", pc.want, pc.name))
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, enc, 0o644))
			}
			golden, err := os.ReadFile(path)
			require.NoError(t, err)
			requireSameBytes(t, golden, enc, "%s encodes differently from its golden bytes", pc.name)

			typ, body, err := raftstore.Decode(golden)
			require.NoError(t, err)
			require.Equal(t, pc.typ, typ)
			persisted := reflect.New(reflect.TypeOf(e.cmd.persistedV1()))
			// The state machine's own strict decoding: a golden file that names a
			// field the persisted form no longer has fails.
			require.NoError(t, command.DecodeBody(body, persisted.Interface()), "golden bytes name exactly the fields of the command's persisted form")
			decoded := reflect.New(reflect.TypeOf(e.cmd))
			require.NoError(t, json.Unmarshal(body, decoded.Interface()))
			require.Equal(t, e.cmd, decoded.Elem().Interface(), "golden bytes decode to the command")

			f, _ := replay(t, encodeEntries(t, entries[:at], 1))
			_, err = f.Handlers()[typ](uint64(at+1), body)
			require.NoError(t, err)
		})
	}
}

// legacySnapshotPath is a snapshot as releases before the snapshot header
// wrote it (format version 0): the state after the first legacyEntries
// entries of golden.log. It is never regenerated.
const (
	legacySnapshotPath = "testdata/snapshot-v0.json"
	legacyEntries      = 70
)

// TestGoldenSnapshotVersions: this release writes version 1, still reads
// the legacy version 0 to the same state, and refuses a newer version or a
// malformed header with raftstore.ErrBadSnapshot, keeping its state.
func TestGoldenSnapshotVersions(t *testing.T) {
	golden, err := os.ReadFile(goldenSnapshotPath)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(golden, []byte("molt-coordinator-snapshot 1\n{")), "this release writes version 1")

	legacy, err := os.ReadFile(legacySnapshotPath)
	require.NoError(t, err)
	st, version, err := decodeSnapshot(legacy)
	require.NoError(t, err)
	require.Equal(t, 0, version)
	fromLegacy, err := encodeSnapshot(st, 1)
	require.NoError(t, err)
	head, _ := replay(t, readGoldenLog(t, goldenLogPath)[:legacyEntries])
	want, err := head.Snapshot()
	require.NoError(t, err)
	requireSameBytes(t, want, fromLegacy, "a legacy snapshot restores to the state it was taken from")

	body := golden[bytes.IndexByte(golden, '\n')+1:]
	for _, tc := range []struct {
		name, data, msg string
	}{
		{"newer version", "molt-coordinator-snapshot 2\n" + string(body), "version 2 is newer than this release reads"},
		{"empty", "", "not a coordinator snapshot"},
		{"other format", "MOLTSNAP\x01", "not a coordinator snapshot"},
		{"no version", "molt-coordinator-snapshot \n{}", "no valid version"},
		{"version 0 with header", "molt-coordinator-snapshot 0\n{}", "no valid version"},
		{"padded version", "molt-coordinator-snapshot 01\n{}", "no valid version"},
		{"no newline", "molt-coordinator-snapshot 1", "no valid version"},
		{"bad body", "molt-coordinator-snapshot 1\n{\"clusters\":", "version 1"},
		{"bad legacy body", "{\"clusters\":[]}", "version 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New()
			require.NoError(t, f.Restore(golden))
			err := f.Restore([]byte(tc.data))
			require.ErrorIs(t, err, raftstore.ErrBadSnapshot)
			require.ErrorContains(t, err, tc.msg)
			after, err := f.Snapshot()
			require.NoError(t, err)
			requireSameBytes(t, golden, after, "a refused snapshot changes nothing")
		})
	}
}

// requireSameBytes fails with the first difference and some context,
// rather than printing two whole snapshots.
func requireSameBytes(t *testing.T, want, got []byte, msgAndArgs ...any) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	around := func(b []byte) string { return string(b[max(0, i-80):min(len(b), i+80)]) }
	require.Fail(t, fmt.Sprintf("bytes differ at offset %d (lengths %d and %d)\nwant …%s…\ngot  …%s…", i, len(want), len(got), around(want), around(got)), msgAndArgs...)
}
