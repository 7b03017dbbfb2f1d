package statemachine

import (
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore/command"
)

// Command types: every coordinator command number, each written out as a
// literal, here and nowhere else. Append-only: logs and snapshots on disk
// carry these numbers, so a number is never renumbered, never reused for
// another command, and never computed from another. A new command takes
// the next free number, a row in pinnedCommands (commands_golden_test.go)
// and a golden file in testdata/commands/. Numbers 1–15 are raftstore's.
const (
	CmdPutRelease       command.Type = 16
	CmdPutCluster       command.Type = 17
	CmdDeleteCluster    command.Type = 18
	CmdStartUpgrade     command.Type = 19
	CmdAdvance          command.Type = 20
	CmdNodeStepResult   command.Type = 21
	CmdStepResult       command.Type = 22
	CmdPoolCommand      command.Type = 23
	CmdRetryNode        command.Type = 24
	CmdAgentRegister    command.Type = 25
	CmdAgentHealth      command.Type = 26
	CmdSetProtection    command.Type = 27
	CmdSetPolicy        command.Type = 28 // maintenance.go
	CmdPreflightStart   command.Type = 29 // preflight.go
	CmdPreflightResult  command.Type = 30 // preflight.go
	CmdPreflightFinish  command.Type = 31 // preflight.go
	CmdPutToken         command.Type = 32 // trust.go
	CmdDeleteToken      command.Type = 33 // trust.go
	CmdEnrollAgent      command.Type = 34 // trust.go
	CmdRenewAgentCert   command.Type = 35 // trust.go
	CmdAppendAudit      command.Type = 36 // audit.go
	CmdRewrapSecrets    command.Type = 37 // secrets.go
	CmdPoolWorkResult   command.Type = 38
	CmdAudited          command.Type = 47 // audit.go
	CmdAutoStart        command.Type = 39 // auto.go
	CmdAutoRecord       command.Type = 40 // auto.go
	CmdPutChannel       command.Type = 41 // auto.go
	CmdSetMembers       command.Type = 42 // members.go
	CmdPreflightResults command.Type = 48 // preflight_results.go
	CmdAgentResult      command.Type = 45 // agentupdate.go
	CmdPutSequence      command.Type = 43 // sequences.go
	CmdSequenceOverride command.Type = 44 // sequences.go
	CmdBackup           command.Type = 49 // backups.go
	CmdAgentsMissing    command.Type = 50 // agentsmissing.go
)

// commandSince is the molt release that introduced each command number:
// the lowest release whose members can read its entries. Every entry
// raftstore writes names it (raft.Log.Extensions), so that a member too
// old to read an entry says which release it needs ("needs molt ≥ X").
// Every number registered at 0.1.0 (commit bb51d81, before releases were
// versioned) is 0.1.0. A new command takes the release it ships in; a new
// field of an existing command is named in MinVersion, for the values
// that carry it.
var commandSince = map[command.Type]string{
	CmdPutRelease:       command.BaselineVersion,
	CmdPutCluster:       command.BaselineVersion,
	CmdDeleteCluster:    command.BaselineVersion,
	CmdStartUpgrade:     command.BaselineVersion,
	CmdAdvance:          command.BaselineVersion,
	CmdNodeStepResult:   command.BaselineVersion,
	CmdStepResult:       command.BaselineVersion,
	CmdPoolCommand:      command.BaselineVersion,
	CmdRetryNode:        command.BaselineVersion,
	CmdAgentRegister:    command.BaselineVersion,
	CmdAgentHealth:      command.BaselineVersion,
	CmdSetProtection:    command.BaselineVersion,
	CmdSetPolicy:        command.BaselineVersion,
	CmdPreflightStart:   command.BaselineVersion,
	CmdPreflightResult:  command.BaselineVersion,
	CmdPreflightFinish:  command.BaselineVersion,
	CmdPutToken:         command.BaselineVersion,
	CmdDeleteToken:      command.BaselineVersion,
	CmdEnrollAgent:      command.BaselineVersion,
	CmdRenewAgentCert:   command.BaselineVersion,
	CmdAppendAudit:      command.BaselineVersion,
	CmdRewrapSecrets:    command.BaselineVersion,
	CmdPoolWorkResult:   command.BaselineVersion,
	CmdAudited:          command.BaselineVersion,
	CmdAutoStart:        command.BaselineVersion,
	CmdAutoRecord:       command.BaselineVersion,
	CmdPutChannel:       command.BaselineVersion,
	CmdSetMembers:       SinceMembers,
	CmdPreflightResults: SincePreflightResults,
	CmdAgentResult:      SinceAgentUpdate,
	CmdPutSequence:      SinceSequences,
	CmdSequenceOverride: SinceSequences,
	CmdBackup:           SinceBackups,
	CmdAgentsMissing:    SinceAgentsMissing,
}

// CommandSince returns the molt release that introduced command number
// t, and false for a number this release does not register.
func CommandSince(t command.Type) (string, bool) {
	v, ok := commandSince[t]
	return v, ok
}

// MinVersion is the lowest molt release that reads c's entry: the
// release of its command number (commandSince), or a later one when c
// uses a field added after its number (fieldSince). An AuditedCmd needs
// at least what the command it carries needs.
func MinVersion(c command.Command) string {
	v, ok := commandSince[c.Type()]
	if !ok {
		return ""
	}
	if f := fieldSince(c); f != "" {
		if below, ok := command.VersionBelow(v, f); ok && below {
			v = f
		}
	}
	if a, ok := c.(AuditedCmd); ok {
		if inner, ok := commandSince[a.CommandType]; ok {
			if below, ok := command.VersionBelow(v, inner); ok && below {
				v = inner
			}
		}
	}
	return v
}

// fieldSince is the release that introduced the newest field c's value
// uses, "" for none newer than its number.
func fieldSince(c command.Command) string {
	var run *PreflightRun
	switch c := c.(type) {
	case PreflightStartCmd:
		run = &c.Run
	case StartUpgradeCmd:
		run = c.Preflight
	case AutoStartCmd:
		run = c.Preflight
	}
	if run != nil && run.HostPlan != HostPlanNone {
		return SinceHostPlan
	}
	if v := backupFieldsSince(c); v != "" {
		return v
	}
	if c, ok := c.(AgentHealthCmd); ok && c.StaticPods != nil {
		return SinceStaticPods
	}
	return agentFieldsSince(c)
}

// MinVersion makes Machine a raftstore.VersionedMachine (see the
// function MinVersion).
func (*Machine) MinVersion(c command.Command) string { return MinVersion(c) }

// Command is every command of this machine: a value that knows its number
// (Type, one method per command below, returning the constant above) and
// encodes as its persisted form (persistedCommand). The coordinator
// proposes a Command, and nothing else: the unexported method seals the
// interface to this package's command types, so a body proposed under
// another command's number, or a value that is not a command, does not
// compile. For instance, the old form
//
//	c.apply(ctx, statemachine.CmdPutCluster, statemachine.PutReleaseCmd{...})
//
// now fails with
//
//	too many arguments in call to c.apply
//		have (context.Context, command.Type, statemachine.PutReleaseCmd)
//		want (context.Context, statemachine.Command)
//
// and a value that is not a command, c.apply(ctx, api.Release{...}), with
//
//	cannot use api.Release{…} (value of struct type "github.com/moltproject/molt/api".Release)
//	as statemachine.Command value in argument to c.apply:
//	"github.com/moltproject/molt/api".Release does not implement
//	statemachine.Command (missing method MarshalJSON)
//
// (go build, Go 1.26). A type of another package that declared every
// method it sees would still miss the unexported persistedV1.
type Command interface {
	command.Command
	persistedCommand
}

// The number of every command, as the log frames it (command.Encode).
// Each returns its constant whatever the receiver, so the zero value
// names the number too (the registry, fsm.go, relies on it).

func (PutReleaseCmd) Type() command.Type      { return CmdPutRelease }
func (PutClusterCmd) Type() command.Type      { return CmdPutCluster }
func (DeleteClusterCmd) Type() command.Type   { return CmdDeleteCluster }
func (StartUpgradeCmd) Type() command.Type    { return CmdStartUpgrade }
func (AdvanceCmd) Type() command.Type         { return CmdAdvance }
func (NodeStepResultCmd) Type() command.Type  { return CmdNodeStepResult }
func (StepResultCmd) Type() command.Type      { return CmdStepResult }
func (PoolCommandCmd) Type() command.Type     { return CmdPoolCommand }
func (RetryNodeCmd) Type() command.Type       { return CmdRetryNode }
func (AgentRegisterCmd) Type() command.Type   { return CmdAgentRegister }
func (AgentHealthCmd) Type() command.Type     { return CmdAgentHealth }
func (SetProtectionCmd) Type() command.Type   { return CmdSetProtection }
func (SetPolicyCmd) Type() command.Type       { return CmdSetPolicy }
func (PreflightStartCmd) Type() command.Type  { return CmdPreflightStart }
func (PreflightResultCmd) Type() command.Type { return CmdPreflightResult }
func (PreflightFinishCmd) Type() command.Type { return CmdPreflightFinish }
func (PutTokenCmd) Type() command.Type        { return CmdPutToken }
func (DeleteTokenCmd) Type() command.Type     { return CmdDeleteToken }
func (EnrollAgentCmd) Type() command.Type     { return CmdEnrollAgent }
func (RenewAgentCertCmd) Type() command.Type  { return CmdRenewAgentCert }
func (AppendAuditCmd) Type() command.Type     { return CmdAppendAudit }
func (RewrapSecretsCmd) Type() command.Type   { return CmdRewrapSecrets }
func (PoolWorkResultCmd) Type() command.Type  { return CmdPoolWorkResult }
func (AuditedCmd) Type() command.Type         { return CmdAudited }
func (AutoStartCmd) Type() command.Type       { return CmdAutoStart }
func (AutoRecordCmd) Type() command.Type      { return CmdAutoRecord }
func (PutChannelCmd) Type() command.Type      { return CmdPutChannel }

// Every command carries Now: the leader's clock when it decided. Apply
// functions never read a clock, so every replica applies the same bytes to
// the same result.
//
// The command structs below carry the values the coordinator and the
// apply functions work with (engine types of phases, the API's wire
// types); their bytes in the log are those of their persisted forms,
// persisted_v1_commands.go (see persisted.go).

// PutReleaseCmd (CmdPutRelease) adds or replaces a release catalog entry.
type PutReleaseCmd struct {
	Release api.Release
	Now     time.Time
}

// PutClusterCmd (CmdPutCluster) registers a cluster or changes its shape.
type PutClusterCmd struct {
	Spec phases.ClusterSpec
	// KubeconfigSealed is the cluster's kubeconfig sealed by the leader
	// (package seal, purpose "kubeconfig/<cluster>"); empty keeps the one
	// the cluster has.
	KubeconfigSealed string
	// Kubeconfig is a kubeconfig in plain text, as entries written before
	// kubeconfigs were sealed carry it; the coordinator no longer proposes
	// it. secrets.go.
	Kubeconfig string
	Now        time.Time
	// Policy is the maintenance policy given with the request, stored in
	// the same apply as the spec and validated as CmdSetPolicy validates
	// one (an invalid policy refuses the whole entry); nil keeps the
	// cluster's policy (a new cluster has none). maintenance.go.
	Policy *maintenance.Policy
	// HoldUntil is the end of the registration hold the leader gives a
	// cluster registered without a policy (schedule.State.HeldUntil): it
	// applies only when the entry registers a new cluster and carries no
	// Policy. Zero, as in entries from before the hold: none.
	HoldUntil time.Time
}

// DeleteClusterCmd (CmdDeleteCluster) forgets a cluster that is not upgrading.
type DeleteClusterCmd struct {
	Name string
	Now  time.Time
}

// StartUpgradeCmd (CmdStartUpgrade) starts an upgrade, re-checking every rule on the state it lands on.
type StartUpgradeCmd struct {
	Cluster string
	To      phases.Version
	Options phases.Options
	Now     time.Time
	// Preflight is the run the upgrade waits for, started by this same
	// entry: the upgrade begins in state preflight, and the entry that
	// stores the run's report moves it to running or refused. Entries
	// written before preflight was replicated with the upgrade carry none
	// and start the upgrade running at once.
	Preflight *PreflightRun
}

// AdvanceCmd commits a batch of decisions for one upgrade. Each action is
// re-checked against the state it lands on; stale ones are dropped.
type AdvanceCmd struct {
	Cluster string
	Upgrade string
	Actions []phases.Action
	Now     time.Time
	// Protections go with a batch that starts an automatic upgrade's pool
	// step: node → when the last pod on it protected from eviction (SPEC
	// §8) becomes evictable. They are recorded by the same apply that
	// starts the step, so no node of the pool can start before its
	// protection is known. Entries older than this field carry none.
	Protections map[string]time.Time
}

// NodeStepResultCmd (CmdNodeStepResult) commits a node step's outcome, pinned to the node's cursor and attempt.
type NodeStepResultCmd struct {
	Cluster string
	Result  phases.NodeStepResult
	Now     time.Time
}

// PoolWorkResultCmd (CmdPoolWorkResult) commits the outcome of a
// blue/green pool's work, pinned to its phase and attempt.
type PoolWorkResultCmd struct {
	Cluster string
	Result  phases.PoolWorkResult
	Now     time.Time
}

// StepResultCmd (CmdStepResult) commits a cluster-wide step's outcome (add-ons, lifecycle, health).
type StepResultCmd struct {
	Cluster string
	Result  phases.StepResult
	Now     time.Time
}

// PoolCommandCmd (CmdPoolCommand) runs cancel, resume, rollback or complete on a pool.
type PoolCommandCmd struct {
	Cluster string
	Pool    string
	Command string
	Now     time.Time
}

// RetryNodeCmd (CmdRetryNode) gives a failed node a new attempt.
type RetryNodeCmd struct {
	Cluster string
	Node    string
	Now     time.Time
}

// AgentRegisterCmd (CmdAgentRegister) records an agent admitted for a node.
type AgentRegisterCmd struct {
	Cluster string
	Node    string
	Address string
	Now     time.Time
}

// AgentHealthCmd (CmdAgentHealth) records a change of an agent's replicated liveness.
type AgentHealthCmd struct {
	Cluster    string
	Node       string
	Missing    bool
	Healthy    bool
	Kubelet    string
	Containerd string
	Now        time.Time
	// StaticPods, when not nil, is the image of each static pod the agent
	// reports running (AgentRecord.StaticPods; empty: none); nil leaves
	// the record's as it was (a beat that did not carry them, or a
	// cluster with a member before SinceStaticPods).
	StaticPods map[string]string
}

// SetProtectionCmd (CmdSetProtection) records when a node's protected pods become evictable.
type SetProtectionCmd struct {
	Cluster string
	Upgrade string
	Node    string
	Until   time.Time
}

// AdvanceResult reports which actions of a batch were applied.
type AdvanceResult struct {
	Applied []string
	Stale   []string
}
