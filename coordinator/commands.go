package coordinator

import (
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
)

// Command types: every coordinator command number, each written out as a
// literal, here and nowhere else. Append-only: logs and snapshots on disk
// carry these numbers, so a number is never renumbered, never reused for
// another command, and never computed from another. A new command takes
// the next free number, a row in pinnedCommands (commands_golden_test.go)
// and a golden file in testdata/commands/. Numbers 1–15 are raftstore's.
const (
	cmdPutRelease      raftstore.CommandType = 16
	cmdPutCluster      raftstore.CommandType = 17
	cmdDeleteCluster   raftstore.CommandType = 18
	cmdStartUpgrade    raftstore.CommandType = 19
	cmdAdvance         raftstore.CommandType = 20
	cmdNodeStepResult  raftstore.CommandType = 21
	cmdStepResult      raftstore.CommandType = 22
	cmdPoolCommand     raftstore.CommandType = 23
	cmdRetryNode       raftstore.CommandType = 24
	cmdAgentRegister   raftstore.CommandType = 25
	cmdAgentHealth     raftstore.CommandType = 26
	cmdSetProtection   raftstore.CommandType = 27
	cmdSetPolicy       raftstore.CommandType = 28 // maintenance.go
	cmdPreflightStart  raftstore.CommandType = 29 // preflight.go
	cmdPreflightResult raftstore.CommandType = 30 // preflight.go
	cmdPreflightFinish raftstore.CommandType = 31 // preflight.go
)

// Every command carries Now: the leader's clock when it decided. Apply
// functions never read a clock, so every replica applies the same bytes to
// the same result.

type putReleaseCmd struct {
	Release api.Release `json:"release"`
	Now     time.Time   `json:"now"`
}

type putClusterCmd struct {
	Spec       phases.ClusterSpec `json:"spec"`
	Kubeconfig string             `json:"kubeconfig,omitempty"`
	Now        time.Time          `json:"now"`
}

type deleteClusterCmd struct {
	Name string    `json:"name"`
	Now  time.Time `json:"now"`
}

type startUpgradeCmd struct {
	Cluster string         `json:"cluster"`
	To      phases.Version `json:"to"`
	Options phases.Options `json:"options"`
	Now     time.Time      `json:"now"`
	// Preflight is the run the upgrade waits for, started by this same
	// entry: the upgrade begins in state preflight, and the entry that
	// stores the run's report moves it to running or refused. Entries
	// written before preflight was replicated with the upgrade carry none
	// and start the upgrade running at once.
	Preflight *PreflightRun `json:"preflight,omitempty"`
}

// advanceCmd commits a batch of decisions for one upgrade. Each action is
// re-checked against the state it lands on; stale ones are dropped.
type advanceCmd struct {
	Cluster string          `json:"cluster"`
	Upgrade string          `json:"upgrade"`
	Actions []phases.Action `json:"actions"`
	Now     time.Time       `json:"now"`
	// Protections go with a batch that starts an automatic upgrade's pool
	// step: node → when the last pod on it protected from eviction (SPEC
	// §8) becomes evictable. They are recorded by the same apply that
	// starts the step, so no node of the pool can start before its
	// protection is known. Entries older than this field carry none.
	Protections map[string]time.Time `json:"protections,omitempty"`
}

type nodeStepResultCmd struct {
	Cluster string                `json:"cluster"`
	Result  phases.NodeStepResult `json:"result"`
	Now     time.Time             `json:"now"`
}

type stepResultCmd struct {
	Cluster string            `json:"cluster"`
	Result  phases.StepResult `json:"result"`
	Now     time.Time         `json:"now"`
}

type poolCommandCmd struct {
	Cluster string    `json:"cluster"`
	Pool    string    `json:"pool"`
	Command string    `json:"command"`
	Now     time.Time `json:"now"`
}

type retryNodeCmd struct {
	Cluster string    `json:"cluster"`
	Node    string    `json:"node"`
	Now     time.Time `json:"now"`
}

type agentRegisterCmd struct {
	Cluster string    `json:"cluster"`
	Node    string    `json:"node"`
	Address string    `json:"address,omitempty"`
	Now     time.Time `json:"now"`
}

type agentHealthCmd struct {
	Cluster    string    `json:"cluster"`
	Node       string    `json:"node"`
	Missing    bool      `json:"missing"`
	Healthy    bool      `json:"healthy"`
	Kubelet    string    `json:"kubelet,omitempty"`
	Containerd string    `json:"containerd,omitempty"`
	Now        time.Time `json:"now"`
}

type setProtectionCmd struct {
	Cluster string    `json:"cluster"`
	Upgrade string    `json:"upgrade"`
	Node    string    `json:"node"`
	Until   time.Time `json:"until"`
}

// advanceResult reports which actions of a batch were applied.
type advanceResult struct {
	Applied []string
	Stale   []string
}
