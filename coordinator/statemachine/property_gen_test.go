package statemachine

// The generators of TestPropertyCommandSequences (property_test.go): a
// command of every type, valid or spoiled, drawn from a small universe of
// names and read off the live state as the leader would.

import (
	"fmt"
	"slices"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
	"github.com/moltproject/molt/raftstore"
)

// The universe commands draw their names from: small, so they collide.
var (
	propClusters = []string{"a", "b", "adm", "u", "ghost"}
	propVersions = []string{"1.33.6", "1.34.4", "1.34.5", "1.35.0"}
	propNodes    = []string{"cp-1", "w-1", "w-2", "nope"}
	propTokens   = []string{"op1", "bt1", "bt2"}
	propChannels = []string{"regular", "rapid", "stable", "bogus"}
)

func (h *propHarness) advanceClock(rt *rapid.T) {
	h.now = h.now.Add(rapid.SampledFrom([]time.Duration{0, time.Second, time.Minute, 10 * time.Minute, 6 * time.Hour, 3 * 24 * time.Hour}).Draw(rt, "clock"))
}

func (h *propHarness) next() string {
	h.serial++
	return fmt.Sprintf("%04x", h.serial)
}

func pick[T any](rt *rapid.T, label string, from ...T) T {
	return rapid.SampledFrom(from).Draw(rt, label)
}

// often is true three times out of four: for draws that keep a command
// valid.
func often(rt *rapid.T, label string) bool { return rapid.IntRange(0, 3).Draw(rt, label) > 0 }

// cluster returns a copy of a cluster's record, or nil.
func (h *propHarness) cluster(name string) *ClusterRecord {
	r, err := h.live.Cluster(name)
	if err != nil {
		return nil
	}
	return &r
}

// clusterName draws a cluster, most often a registered one.
func (h *propHarness) clusterName(rt *rapid.T) string {
	if names := h.live.ClusterNames(); len(names) > 0 && often(rt, "registered cluster") {
		return pick(rt, "cluster", names...)
	}
	return pick(rt, "cluster", propClusters...)
}

// upgradingCluster draws a cluster, most often one whose upgrade has not
// ended.
func (h *propHarness) upgradingCluster(rt *rapid.T) string {
	var names []string
	for _, c := range h.live.ClusterNames() {
		if id, _ := h.live.PendingUpgradeID(c); id != "" {
			names = append(names, c)
		}
	}
	if len(names) > 0 && often(rt, "upgrading cluster") {
		return pick(rt, "cluster", names...)
	}
	return h.clusterName(rt)
}

// upgradeOf returns a copy of the cluster's upgrade and the ID a command
// names it by (sometimes another one).
func (h *propHarness) upgradeOf(rt *rapid.T, c string) (*phases.Upgrade, string) {
	u, err := h.live.Upgrade(c)
	if err != nil || !often(rt, "right upgrade") {
		return u, pick(rt, "upgrade id", c+"-1.34.4-9", "other")
	}
	return u, u.ID
}

// delta spoils a counter now and then: a stale or future cursor or attempt.
func delta(rt *rapid.T, label string) int { return pick(rt, label, 0, 0, 0, 0, 0, -1, 1) }

type propGen struct {
	weight int
	typ    raftstore.CommandType
	gen    func(*propHarness, *rapid.T) Command
}

// propGens generates each command type; weights favour the commands that
// move an upgrade on, so sequences reach deep states.
var propGens = []propGen{
	{3, CmdPutRelease, (*propHarness).genPutRelease},
	{4, CmdPutCluster, (*propHarness).genPutCluster},
	{1, CmdDeleteCluster, (*propHarness).genDeleteCluster},
	{6, CmdStartUpgrade, (*propHarness).genStartUpgrade},
	{10, CmdAdvance, (*propHarness).genAdvance},
	{12, CmdNodeStepResult, (*propHarness).genNodeStepResult},
	{4, CmdStepResult, (*propHarness).genStepResult},
	{2, CmdPoolCommand, (*propHarness).genPoolCommand},
	{2, CmdRetryNode, (*propHarness).genRetryNode},
	{3, CmdAgentRegister, (*propHarness).genAgentRegister},
	{3, CmdAgentHealth, (*propHarness).genAgentHealth},
	{1, CmdSetProtection, (*propHarness).genSetProtection},
	{2, CmdSetPolicy, (*propHarness).genSetPolicy},
	{2, CmdPreflightStart, (*propHarness).genPreflightStart},
	{4, CmdPreflightResult, (*propHarness).genPreflightResult},
	{2, CmdPreflightResults, (*propHarness).genPreflightResults},
	{3, CmdPreflightFinish, (*propHarness).genPreflightFinish},
	{2, CmdPutToken, (*propHarness).genPutToken},
	{1, CmdDeleteToken, (*propHarness).genDeleteToken},
	{2, CmdEnrollAgent, (*propHarness).genEnrollAgent},
	{2, CmdRenewAgentCert, (*propHarness).genRenewAgentCert},
	{2, CmdAppendAudit, (*propHarness).genAppendAudit},
	{1, CmdRewrapSecrets, (*propHarness).genRewrapSecrets},
	{1, CmdPoolWorkResult, (*propHarness).genPoolWorkResult},
	{2, CmdAutoStart, (*propHarness).genAutoStart},
	{2, CmdAutoRecord, (*propHarness).genAutoRecord},
	{2, CmdPutChannel, (*propHarness).genPutChannel},
	{4, CmdAudited, nil}, // any other command, wrapped (command)
	{40, 0, nil},         // the leader's next command for an upgrade (tick)
}

// command draws one command and its type; inner draws one that may go
// inside an AuditedCmd.
func (h *propHarness) command(rt *rapid.T, inner bool) Command {
	total := 0
	for _, g := range propGens {
		total += g.weight
	}
	for {
		w := rapid.IntRange(0, total-1).Draw(rt, "command type")
		var g propGen
		for _, g = range propGens {
			if w < g.weight {
				break
			}
			w -= g.weight
		}
		if g.typ == 0 {
			if cmd, ok := h.tick(rt); ok {
				return cmd
			}
			continue
		}
		if inner && !Auditable(g.typ) {
			continue
		}
		if g.typ == CmdAudited {
			return h.genAudited(rt)
		}
		return g.gen(h, rt)
	}
}

// tick is what a leader proposes next for one upgrade that has not
// ended, as the coordinator would: the report of the preflight run it
// waits for, the actions phases.Decide returns, or the result of a step
// or a node that runs; most often a success. It drives upgrades through
// to their end, which random commands alone rarely do. False when no
// upgrade is pending.
func (h *propHarness) tick(rt *rapid.T) (Command, bool) {
	var names []string
	for _, c := range h.live.ClusterNames() {
		if id, _ := h.live.PendingUpgradeID(c); id != "" {
			names = append(names, c)
		}
	}
	if len(names) == 0 {
		return nil, false
	}
	c := pick(rt, "tick cluster", names...)
	u, err := h.live.Upgrade(c)
	require.NoError(rt, err)
	if u.State == phases.UpgradePreflight {
		rep := preflight.Report{Verdict: preflight.Passed}
		if !often(rt, "passes") && !often(rt, "passes 2") {
			rep = preflight.Report{Verdict: preflight.Failed, Failed: []string{preflight.IDAgentsReporting}}
		}
		return PreflightFinishCmd{Cluster: c, Run: u.Preflight, Report: rep, Now: h.now}, true
	}
	// Actions that commit go in an AdvanceCmd; the others are work the
	// leader does (run a node's step), which results report.
	var acts []phases.Action
	for _, a := range phases.Decide(u, h.now, phases.Open).Actions {
		if a.Commits() {
			acts = append(acts, a)
		}
	}
	if len(acts) > 0 {
		return AdvanceCmd{Cluster: c, Upgrade: u.ID, Actions: acts, Now: h.now}, true
	}
	ok := often(rt, "ok") || often(rt, "ok 2")
	for _, s := range u.Steps {
		if s.Kind != phases.StepPool && s.State == phases.StateRunning {
			return StepResultCmd{Cluster: c, Now: h.now, Result: phases.StepResult{Upgrade: u.ID, Step: s.ID, Attempt: s.Attempts, OK: ok}}, true
		}
	}
	var running []phases.NodeTask
	for _, n := range u.Nodes {
		if n.State == phases.StateRunning {
			running = append(running, n)
		}
	}
	if len(running) == 0 {
		return nil, false
	}
	n := running[rapid.IntRange(0, len(running)-1).Draw(rt, "tick node")]
	return NodeStepResultCmd{Cluster: c, Now: h.now,
		Result: phases.NodeStepResult{Upgrade: u.ID, Node: n.Node, Cursor: n.Cursor, Attempt: n.Attempt, OK: ok}}, true
}

func (h *propHarness) genAudited(rt *rapid.T) Command {
	c, err := NewAudited(h.auditRecord(rt), h.retention(rt), h.command(rt, true))
	require.NoError(rt, err)
	return c
}

func (h *propHarness) auditRecord(rt *rapid.T) AuditRecord {
	kind := pick(rt, "audit kind", "operator", "agent", "bootstrap")
	return AuditRecord{Time: h.now, Principal: kind + ":" + h.next(), Kind: kind, Role: "admin", Method: "POST",
		Route: "/v1/x", Cluster: pick(rt, "audit cluster", propClusters...), Status: pick(rt, "status", 200, 201, 409)}
}

func (h *propHarness) retention(rt *rapid.T) AuditRetention {
	return AuditRetention{MaxEntries: pick(rt, "audit max", 0, 2, 5), MaxAge: pick(rt, "audit age", time.Duration(0), time.Hour)}
}

func (h *propHarness) genAppendAudit(rt *rapid.T) Command {
	return AppendAuditCmd{Record: h.auditRecord(rt), Retention: h.retention(rt)}
}

func (h *propHarness) genPutRelease(rt *rapid.T) Command {
	v := pick(rt, "release", append(propVersions, "v1.34.5", "1.x")...)
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	rel := api.Release{Version: v, EndOfSupport: h.now.Add(pick(rt, "eos", -24*time.Hour, 30*24*time.Hour)),
		Channels: rapid.SliceOfNDistinct(rapid.SampledFrom(propChannels[:3]), 0, 2, rapid.ID[string]).Draw(rt, "channels"),
		Components: api.ReleaseComponents{
			Kubelet:    api.BinaryArtifact{URL: "http://artifacts.test/kubelet-" + v, SHA256: sum},
			StaticPods: map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v" + v},
			Images:     []api.ImageArchive{{URL: "http://artifacts.test/images-" + v, SHA256: sum}},
		}}
	if !often(rt, "valid artifact") {
		rel.Components.Kubelet.SHA256 = "bad"
	}
	return PutReleaseCmd{Release: rel, Now: h.now}
}

func (h *propHarness) spec(rt *rapid.T, name string) phases.ClusterSpec {
	s := phases.ClusterSpec{Name: name, Kind: phases.KindStandalone, Channel: pick(rt, "channel", "", "regular", "rapid")}
	switch name {
	case "adm":
		s.Kind = phases.KindAdmin
	case "u":
		s.Kind, s.AdminCluster = phases.KindUser, "adm"
	}
	version := pick(rt, "cluster version", propVersions...)
	if r := h.cluster(name); r != nil && often(rt, "restate version") {
		version = r.StatusVersion.String()
	}
	s.Version = phases.MustParseVersion(version)
	workers := []phases.Node{{Name: "w-1", Address: "10.0.0.21"}}
	if often(rt, "second worker") {
		workers = append(workers, phases.Node{Name: "w-2", Address: "10.0.0.22"})
	}
	s.Pools = []phases.Pool{
		{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: "cp-1", Address: "10.0.0.11"}}},
		{Name: "workers", Role: phases.RoleWorker, Nodes: workers},
	}
	if !often(rt, "valid spec") && !often(rt, "valid spec 2") {
		s.Pools[1].Nodes = append(s.Pools[1].Nodes, phases.Node{Name: "cp-1"}) // a node twice
	}
	return s
}

func (h *propHarness) policy(rt *rapid.T) maintenance.Policy {
	switch rapid.IntRange(0, 4).Draw(rt, "policy") {
	case 0:
		return maintenance.Policy{}
	case 1:
		day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		return maintenance.Policy{Window: &maintenance.Window{Start: day.Add(time.Hour), End: day.Add(5 * time.Hour), Recurrence: "FREQ=DAILY"}}
	case 2:
		return maintenance.Policy{Window: &maintenance.Window{Start: h.now, End: h.now.Add(time.Hour), Recurrence: "FREQ=NEVER"}} // invalid
	case 3:
		return maintenance.Policy{Exclusions: []maintenance.Exclusion{{Start: h.now, End: h.now.Add(time.Hour)}}} // unnamed: invalid
	default:
		return maintenance.Policy{Exclusions: []maintenance.Exclusion{{Name: "freeze", Start: h.now, End: h.now.Add(48 * time.Hour)}}}
	}
}

func (h *propHarness) genPutCluster(rt *rapid.T) Command {
	c := pick(rt, "cluster", propClusters[:4]...)
	cmd := PutClusterCmd{Spec: h.spec(rt, c), Now: h.now}
	if rapid.Bool().Draw(rt, "with policy") {
		p := h.policy(rt)
		cmd.Policy = &p
	}
	if rapid.Bool().Draw(rt, "kubeconfig") {
		cmd.KubeconfigSealed = "sealed-" + h.next()
	}
	if rapid.Bool().Draw(rt, "hold") {
		cmd.HoldUntil = h.now.Add(24 * time.Hour)
	}
	return cmd
}

func (h *propHarness) genDeleteCluster(rt *rapid.T) Command {
	return DeleteClusterCmd{Name: h.clusterName(rt), Now: h.now}
}

func (h *propHarness) preflightRun(rt *rapid.T, c string, to phases.Version) *PreflightRun {
	id := fmt.Sprintf("%s-%d", c, rapid.IntRange(1, 4).Draw(rt, "run"))
	ops := map[string][]api.Operation{}
	for _, n := range propNodes[:3] {
		ops[n] = []api.Operation{
			{ID: "preflight-" + id + "-" + n + "-artifacts", Kind: api.OpCheckArtifacts,
				CheckArtifacts: &api.CheckArtifacts{Artifacts: []api.Artifact{{Name: "kubelet", URL: "http://artifacts.test/k", SHA256: "00"}}}},
			{ID: "preflight-" + id + "-" + n + "-peers", Kind: api.OpProbePeers, ProbePeers: &api.ProbePeers{Addresses: []string{"10.0.0.1:7443"}}},
		}
	}
	run := &PreflightRun{ID: id, Cluster: c, Target: to, CreatedAt: h.now, Deadline: h.now.Add(2 * time.Minute), Operations: ops}
	if rapid.Bool().Draw(rt, "derived operations") {
		run.Operations, run.HostPlan = nil, HostPlanRing
	}
	return run
}

// target draws an upgrade's target, most often the next version up.
func (h *propHarness) target(rt *rapid.T, c string) phases.Version {
	if r := h.cluster(c); r != nil && often(rt, "next version") {
		i := slices.Index(propVersions, r.StatusVersion.String())
		if i >= 0 && i+1 < len(propVersions) {
			return phases.MustParseVersion(propVersions[i+1])
		}
	}
	return phases.MustParseVersion(pick(rt, "to", propVersions...))
}

func (h *propHarness) genStartUpgrade(rt *rapid.T) Command {
	c := h.clusterName(rt)
	to := h.target(rt, c)
	cmd := StartUpgradeCmd{Cluster: c, To: to, Now: h.now, Options: phases.Options{ConcurrentWorkerPools: rapid.IntRange(1, 2).Draw(rt, "concurrency")}}
	if !often(rt, "no emergency") {
		cmd.Options.EmergencyReason = "cve"
	}
	if rapid.Bool().Draw(rt, "preflight") {
		cmd.Preflight = h.preflightRun(rt, pick(rt, "preflight cluster", c, c, c, "b"), to)
	}
	return cmd
}

func (h *propHarness) genAdvance(rt *rapid.T) Command {
	c := h.upgradingCluster(rt)
	u, id := h.upgradeOf(rt, c)
	cmd := AdvanceCmd{Cluster: c, Upgrade: id, Now: h.now}
	if u != nil {
		acts := phases.Decide(u, h.now, phases.Open).Actions
		if len(acts) > 0 {
			k := rapid.IntRange(0, len(acts)).Draw(rt, "actions")
			cmd.Actions = acts[:k]
			if k > 0 && !often(rt, "no repeat") {
				cmd.Actions = append(cmd.Actions, acts[0]) // the same action twice: stale the second time
			}
		}
		if rapid.Bool().Draw(rt, "protections") {
			cmd.Protections = map[string]time.Time{pick(rt, "protect", propNodes...): h.now.Add(time.Hour)}
		}
	}
	return cmd
}

func (h *propHarness) genNodeStepResult(rt *rapid.T) Command {
	c := h.upgradingCluster(rt)
	u, id := h.upgradeOf(rt, c)
	res := phases.NodeStepResult{Upgrade: id, Node: pick(rt, "node", propNodes...), OK: often(rt, "ok")}
	if u != nil && len(u.Nodes) > 0 && often(rt, "a node of the upgrade") {
		nodes := u.Nodes
		var running []phases.NodeTask
		for _, n := range u.Nodes {
			if n.State == phases.StateRunning {
				running = append(running, n)
			}
		}
		if len(running) > 0 && often(rt, "a running node") {
			nodes = running
		}
		n := nodes[rapid.IntRange(0, len(nodes)-1).Draw(rt, "node index")]
		res.Node, res.Cursor, res.Attempt = n.Node, n.Cursor+delta(rt, "cursor"), n.Attempt+delta(rt, "attempt")
	}
	if !res.OK {
		res.Message = "failed"
	}
	if rapid.Bool().Draw(rt, "left behind") {
		res.LeftBehind = []phases.LeftPod{{Namespace: "ns", Name: "p-" + h.next(), Reason: "terminating"}}
		res.Drained = []phases.Workload{{Namespace: "ns", Name: "w"}}
	}
	return NodeStepResultCmd{Cluster: c, Result: res, Now: h.now}
}

func (h *propHarness) genStepResult(rt *rapid.T) Command {
	c := h.upgradingCluster(rt)
	u, id := h.upgradeOf(rt, c)
	res := phases.StepResult{Upgrade: id, Step: pick(rt, "step", "addons", "lifecycle", "health", "pool/cp"), OK: often(rt, "ok")}
	if u != nil {
		var running []phases.Step
		for _, s := range u.Steps {
			if s.Kind != phases.StepPool && s.State == phases.StateRunning {
				running = append(running, s)
			}
		}
		if len(running) > 0 && often(rt, "a running step") {
			s := running[rapid.IntRange(0, len(running)-1).Draw(rt, "step index")]
			res.Step, res.Attempt = s.ID, s.Attempts+delta(rt, "attempt")
		}
	}
	return StepResultCmd{Cluster: c, Result: res, Now: h.now}
}

func (h *propHarness) genPoolCommand(rt *rapid.T) Command {
	return PoolCommandCmd{Cluster: h.upgradingCluster(rt), Pool: pick(rt, "pool", "cp", "workers", "workers", "nope"),
		Command: pick(rt, "pool command", PoolCancel, PoolResume, PoolRollback, PoolComplete, "explode"), Now: h.now}
}

func (h *propHarness) genRetryNode(rt *rapid.T) Command {
	return RetryNodeCmd{Cluster: h.upgradingCluster(rt), Node: pick(rt, "node", propNodes...), Now: h.now}
}

func (h *propHarness) genAgentRegister(rt *rapid.T) Command {
	n := pick(rt, "node", propNodes...)
	return AgentRegisterCmd{Cluster: h.clusterName(rt), Node: n, Address: n + ":7443", Now: h.now}
}

func (h *propHarness) genAgentHealth(rt *rapid.T) Command {
	return AgentHealthCmd{Cluster: h.clusterName(rt), Node: pick(rt, "node", propNodes...),
		Missing: !often(rt, "present"), Healthy: often(rt, "healthy"), Kubelet: pick(rt, "kubelet", "v1.33.6", "v1.34.4"), Containerd: "1.7.0", Now: h.now}
}

func (h *propHarness) genSetProtection(rt *rapid.T) Command {
	c := h.upgradingCluster(rt)
	_, id := h.upgradeOf(rt, c)
	return SetProtectionCmd{Cluster: c, Upgrade: id, Node: pick(rt, "node", propNodes...), Until: h.now.Add(time.Hour)}
}

func (h *propHarness) genSetPolicy(rt *rapid.T) Command {
	return SetPolicyCmd{Cluster: h.clusterName(rt), Policy: h.policy(rt), Now: h.now}
}

func (h *propHarness) genPreflightStart(rt *rapid.T) Command {
	c := h.clusterName(rt)
	return PreflightStartCmd{Run: *h.preflightRun(rt, c, h.target(rt, c))}
}

// run draws a cluster and one of its stored runs (or a made-up one).
func (h *propHarness) run(rt *rapid.T) (string, PreflightRun) {
	c := h.clusterName(rt)
	if _, waits := h.live.PendingUpgradeID(c); waits != "" && often(rt, "the upgrade's run") {
		if run, err := h.live.Preflight(c, waits); err == nil && run.State == "running" {
			return c, run
		}
	}
	runs, _ := h.live.Preflights(c)
	if len(runs) == 0 || !often(rt, "a stored run") {
		return c, PreflightRun{ID: c + "-9"}
	}
	run, err := h.live.Preflight(c, runs[rapid.IntRange(0, len(runs)-1).Draw(rt, "run index")].Run.ID)
	require.NoError(rt, err)
	return c, run
}

func (h *propHarness) genPreflightResult(rt *rapid.T) Command {
	c, run := h.run(rt)
	node := pick(rt, "node", propNodes...)
	opID := "preflight-" + run.ID + "-" + node + "-peers"
	if ops := run.Operations[node]; len(ops) > 0 && often(rt, "own operation") {
		opID = ops[rapid.IntRange(0, len(ops)-1).Draw(rt, "op")].ID
	}
	state := pick(rt, "op state", api.OpSucceeded, api.OpSucceeded, api.OpFailed, api.OpRunning)
	return PreflightResultCmd{Cluster: c, Run: run.ID, Node: node, Result: api.OperationResult{ID: opID, State: state, StartedAt: h.now,
		Details: map[string]string{"k": h.next()}}}
}

// genPreflightResults batches one to four results, of one run or several.
func (h *propHarness) genPreflightResults(rt *rapid.T) Command {
	n := rapid.IntRange(1, 4).Draw(rt, "batch")
	c := PreflightResultsCmd{Now: h.now}
	for range n {
		c.Results = append(c.Results, h.genPreflightResult(rt).(PreflightResultCmd))
	}
	return c
}

func (h *propHarness) genPreflightFinish(rt *rapid.T) Command {
	c, run := h.run(rt)
	rep := preflight.Report{Verdict: preflight.Passed, Results: []preflight.Result{
		{Check: preflight.IDAgentsReporting, Severity: preflight.Blocking, Status: preflight.Pass, Data: map[string]string{"n": "3"}}}}
	if !often(rt, "passes") {
		rep.Verdict, rep.Failed = preflight.Failed, []string{preflight.IDAgentsReporting}
		rep.Results[0].Status, rep.Results[0].Blocks = preflight.Fail, true
	}
	return PreflightFinishCmd{Cluster: c, Run: run.ID, Report: rep, Now: h.now}
}

func (h *propHarness) genPutToken(rt *rapid.T) Command {
	id := pick(rt, "token", propTokens...)
	tok := TokenRecord{ID: id, SecretHash: "hash-" + h.next(), Kind: TokenKindAPI, Role: pick(rt, "role", "viewer", "operator", "admin", "root")}
	if id != "op1" {
		tok.Kind, tok.Role = TokenKindBootstrap, ""
		tok.Cluster = pick(rt, "token cluster", "a", "b", "u", "")
		tok.Uses = rapid.IntRange(0, 2).Draw(rt, "uses")
		tok.Expires = h.now.Add(pick(rt, "expires", time.Hour, 24*time.Hour))
	}
	if !often(rt, "with hash") {
		tok.SecretHash = ""
	}
	return PutTokenCmd{Token: tok, Now: h.now}
}

func (h *propHarness) genDeleteToken(rt *rapid.T) Command {
	return DeleteTokenCmd{ID: pick(rt, "token", propTokens...), Now: h.now}
}

func (h *propHarness) genEnrollAgent(rt *rapid.T) Command {
	cmd := EnrollAgentCmd{TokenID: pick(rt, "token", propTokens...), Cluster: h.clusterName(rt),
		Node: pick(rt, "node", propNodes...), Serial: h.next(), Now: h.now}
	if toks := h.live.Tokens(); len(toks) > 0 && often(rt, "stored token") {
		tok := toks[rapid.IntRange(0, len(toks)-1).Draw(rt, "token index")]
		cmd.TokenID = tok.ID
		if tok.Cluster != "" && often(rt, "its cluster") {
			cmd.Cluster = tok.Cluster
		}
	}
	return cmd
}

func (h *propHarness) genRenewAgentCert(rt *rapid.T) Command {
	c, n := h.clusterName(rt), pick(rt, "node", propNodes...)
	old := "unknown"
	if r := h.cluster(c); r != nil && len(r.AgentCerts[n]) > 0 && often(rt, "current serial") {
		old = pick(rt, "old serial", r.AgentCerts[n]...)
	}
	return RenewAgentCertCmd{Cluster: c, Node: n, Old: old, Serial: h.next(), Now: h.now}
}

func (h *propHarness) genRewrapSecrets(rt *rapid.T) Command {
	var cmd RewrapSecretsCmd
	for _, c := range propClusters {
		if !rapid.Bool().Draw(rt, "rewrap "+c) {
			continue
		}
		k := KubeconfigRewrap{Cluster: c, Old: "stale", Sealed: "sealed-" + h.next()}
		if r := h.cluster(c); r != nil && often(rt, "current digest") {
			k.Old = SecretDigest(r.StoredKubeconfig())
		}
		cmd.Kubeconfigs = append(cmd.Kubeconfigs, k)
	}
	cmd.Now = h.now
	return cmd
}

func (h *propHarness) genPoolWorkResult(rt *rapid.T) Command {
	c := h.upgradingCluster(rt)
	_, id := h.upgradeOf(rt, c)
	return PoolWorkResultCmd{Cluster: c, Now: h.now, Result: phases.PoolWorkResult{Upgrade: id, Pool: pick(rt, "pool", "cp", "workers"),
		Work: "w", Phase: phases.BlueGreenPhase(pick(rt, "phase", "createGreen", "drainBlue")), OK: true}}
}

func (h *propHarness) genPutChannel(rt *rapid.T) Command {
	v := func(label string) phases.Version {
		s := pick(rt, label, append([]string{"", "1.36.0"}, propVersions...)...)
		if s == "" {
			return phases.Version{}
		}
		return phases.MustParseVersion(s)
	}
	return PutChannelCmd{Channel: pick(rt, "channel", propChannels...), DefaultVersion: v("default"), AutoUpgradeTarget: v("target"), Now: h.now}
}

func (h *propHarness) genAutoStart(rt *rapid.T) Command {
	c := h.clusterName(rt)
	to := h.target(rt, c)
	cmd := AutoStartCmd{Cluster: c, To: to, Kind: maintenance.KindPatch, Reason: "channel", Now: h.now,
		EndOfSupport: !often(rt, "not eos") && !often(rt, "not eos 2")}
	if r := h.cluster(c); r != nil {
		cmd.Kind = schedule.KindOf(r.StatusVersion, to)
		cmd.Seq = r.Seq + delta(rt, "seq")
	}
	if often(rt, "preflight") {
		cmd.Preflight = h.preflightRun(rt, c, to)
	}
	return cmd
}

func (h *propHarness) genAutoRecord(rt *rapid.T) Command {
	c := h.clusterName(rt)
	cmd := AutoRecordCmd{Cluster: c, Upgrade: "none", Now: h.now,
		Outcome: pick(rt, "outcome", schedule.OutcomeDone, schedule.OutcomeRefused, schedule.OutcomeFailed, schedule.OutcomeCancelled)}
	if r := h.cluster(c); r != nil && r.Auto.Last != nil && often(rt, "last attempt") {
		cmd.Upgrade = r.Auto.Last.Upgrade
	}
	return cmd
}
