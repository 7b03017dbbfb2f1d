package statemachine

import (
	"encoding/json"
	"maps"
	"time"

	"github.com/moltproject/molt/internal/conv"
)

// Persisted form of every command (see persisted.go: append-only), and
// the JSON methods through which raftstore's framing (json.Marshal) and
// the apply functions (UnmarshalJSON, strict: unmarshalV1) reach it. A
// command's exported struct (commands.go) is what the coordinator builds
// and an apply function reads; its …V1 twin here, which persistedV1
// returns, is what the log holds.

// persistedCommand is every command: it encodes as the V1 value
// persistedV1 returns. Each command also decodes through that V1 type
// (UnmarshalJSON). Command (commands.go) adds the command's number.
type persistedCommand interface {
	persistedV1() any
	json.Marshaler
}

type putReleaseCmdV1 struct {
	Release releaseV1 `json:"release"`
	Now     time.Time `json:"now"`
}

func (c PutReleaseCmd) persistedV1() any { return putReleaseToV1(c) }

func (c PutReleaseCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *PutReleaseCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, putReleaseFromV1) }

func putReleaseToV1(c PutReleaseCmd) putReleaseCmdV1 {
	return putReleaseCmdV1{Release: releaseToV1(c.Release), Now: c.Now}
}

func putReleaseFromV1(_ *v1Decoder, c putReleaseCmdV1) PutReleaseCmd {
	return PutReleaseCmd{Release: releaseFromV1(c.Release), Now: c.Now}
}

type putClusterCmdV1 struct {
	Spec             clusterSpecV1 `json:"spec"`
	Kubeconfig       string        `json:"kubeconfig,omitempty"`
	Now              time.Time     `json:"now"`
	KubeconfigSealed string        `json:"kubeconfigSealed,omitempty"`
	Policy           *policyV1     `json:"policy,omitempty"`
	HoldUntil        time.Time     `json:"holdUntil,omitzero"`
}

func (c PutClusterCmd) persistedV1() any { return putClusterToV1(c) }

func (c PutClusterCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *PutClusterCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, putClusterFromV1) }

func putClusterToV1(c PutClusterCmd) putClusterCmdV1 {
	return putClusterCmdV1{Spec: clusterSpecToV1(c.Spec), Kubeconfig: c.Kubeconfig, Now: c.Now, KubeconfigSealed: c.KubeconfigSealed,
		Policy: conv.Ptr(c.Policy, policyToV1), HoldUntil: c.HoldUntil}
}

func putClusterFromV1(d *v1Decoder, c putClusterCmdV1) PutClusterCmd {
	return PutClusterCmd{Spec: d.clusterSpec(c.Spec), Kubeconfig: c.Kubeconfig, Now: c.Now, KubeconfigSealed: c.KubeconfigSealed,
		Policy: conv.Ptr(c.Policy, policyFromV1), HoldUntil: c.HoldUntil}
}

type deleteClusterCmdV1 struct {
	Name string    `json:"name"`
	Now  time.Time `json:"now"`
}

func (c DeleteClusterCmd) persistedV1() any { return deleteClusterToV1(c) }

func (c DeleteClusterCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *DeleteClusterCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, deleteClusterFromV1)
}

func deleteClusterToV1(c DeleteClusterCmd) deleteClusterCmdV1 { return deleteClusterCmdV1(c) }

func deleteClusterFromV1(_ *v1Decoder, c deleteClusterCmdV1) DeleteClusterCmd {
	return DeleteClusterCmd(c)
}

type startUpgradeCmdV1 struct {
	Cluster   string          `json:"cluster"`
	To        string          `json:"to"`
	Options   optionsV1       `json:"options"`
	Now       time.Time       `json:"now"`
	Preflight *preflightRunV1 `json:"preflight,omitempty"`
}

func (c StartUpgradeCmd) persistedV1() any { return startUpgradeToV1(c) }

func (c StartUpgradeCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *StartUpgradeCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, startUpgradeFromV1) }

func startUpgradeToV1(c StartUpgradeCmd) startUpgradeCmdV1 {
	return startUpgradeCmdV1{Cluster: c.Cluster, To: c.To.String(), Options: optionsToV1(c.Options), Now: c.Now,
		Preflight: conv.Ptr(c.Preflight, preflightRunToV1)}
}

func startUpgradeFromV1(d *v1Decoder, c startUpgradeCmdV1) StartUpgradeCmd {
	return StartUpgradeCmd{Cluster: c.Cluster, To: d.version(c.To), Options: d.options(c.Options), Now: c.Now,
		Preflight: conv.Ptr(c.Preflight, d.preflightRun)}
}

type advanceCmdV1 struct {
	Cluster     string               `json:"cluster"`
	Upgrade     string               `json:"upgrade"`
	Actions     []actionV1           `json:"actions"`
	Now         time.Time            `json:"now"`
	Protections map[string]time.Time `json:"protections,omitempty"`
}

func (c AdvanceCmd) persistedV1() any { return advanceToV1(c) }

func (c AdvanceCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *AdvanceCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, advanceFromV1) }

func advanceToV1(c AdvanceCmd) advanceCmdV1 {
	return advanceCmdV1{Cluster: c.Cluster, Upgrade: c.Upgrade, Actions: conv.Slice(c.Actions, actionToV1), Now: c.Now,
		Protections: conv.Map(c.Protections, conv.Same[time.Time])}
}

func advanceFromV1(_ *v1Decoder, c advanceCmdV1) AdvanceCmd {
	return AdvanceCmd{Cluster: c.Cluster, Upgrade: c.Upgrade, Actions: conv.Slice(c.Actions, actionFromV1), Now: c.Now,
		Protections: conv.Map(c.Protections, conv.Same[time.Time])}
}

type nodeStepResultCmdV1 struct {
	Cluster string           `json:"cluster"`
	Result  nodeStepResultV1 `json:"result"`
	Now     time.Time        `json:"now"`
}

func (c NodeStepResultCmd) persistedV1() any { return nodeStepResultCmdToV1(c) }

func (c NodeStepResultCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *NodeStepResultCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, nodeStepResultCmdFromV1)
}

func nodeStepResultCmdToV1(c NodeStepResultCmd) nodeStepResultCmdV1 {
	return nodeStepResultCmdV1{Cluster: c.Cluster, Result: nodeStepResultToV1(c.Result), Now: c.Now}
}

func nodeStepResultCmdFromV1(_ *v1Decoder, c nodeStepResultCmdV1) NodeStepResultCmd {
	return NodeStepResultCmd{Cluster: c.Cluster, Result: nodeStepResultFromV1(c.Result), Now: c.Now}
}

type poolWorkResultCmdV1 struct {
	Cluster string           `json:"cluster"`
	Result  poolWorkResultV1 `json:"result"`
	Now     time.Time        `json:"now"`
}

func (c PoolWorkResultCmd) persistedV1() any { return poolWorkResultCmdToV1(c) }

func (c PoolWorkResultCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *PoolWorkResultCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, poolWorkResultCmdFromV1)
}

func poolWorkResultCmdToV1(c PoolWorkResultCmd) poolWorkResultCmdV1 {
	return poolWorkResultCmdV1{Cluster: c.Cluster, Result: poolWorkResultToV1(c.Result), Now: c.Now}
}

func poolWorkResultCmdFromV1(_ *v1Decoder, c poolWorkResultCmdV1) PoolWorkResultCmd {
	return PoolWorkResultCmd{Cluster: c.Cluster, Result: poolWorkResultFromV1(c.Result), Now: c.Now}
}

type stepResultCmdV1 struct {
	Cluster string       `json:"cluster"`
	Result  stepResultV1 `json:"result"`
	Now     time.Time    `json:"now"`
}

func (c StepResultCmd) persistedV1() any { return stepResultCmdToV1(c) }

func (c StepResultCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *StepResultCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, stepResultCmdFromV1) }

func stepResultCmdToV1(c StepResultCmd) stepResultCmdV1 {
	return stepResultCmdV1{Cluster: c.Cluster, Result: stepResultToV1(c.Result), Now: c.Now}
}

func stepResultCmdFromV1(_ *v1Decoder, c stepResultCmdV1) StepResultCmd {
	return StepResultCmd{Cluster: c.Cluster, Result: stepResultFromV1(c.Result), Now: c.Now}
}

type poolCommandCmdV1 struct {
	Cluster string    `json:"cluster"`
	Pool    string    `json:"pool"`
	Command string    `json:"command"`
	Now     time.Time `json:"now"`
}

func (c PoolCommandCmd) persistedV1() any { return poolCommandToV1(c) }

func (c PoolCommandCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *PoolCommandCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, poolCommandFromV1) }

func poolCommandToV1(c PoolCommandCmd) poolCommandCmdV1 { return poolCommandCmdV1(c) }

func poolCommandFromV1(_ *v1Decoder, c poolCommandCmdV1) PoolCommandCmd { return PoolCommandCmd(c) }

type retryNodeCmdV1 struct {
	Cluster string    `json:"cluster"`
	Node    string    `json:"node"`
	Now     time.Time `json:"now"`
}

func (c RetryNodeCmd) persistedV1() any { return retryNodeToV1(c) }

func (c RetryNodeCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *RetryNodeCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, retryNodeFromV1) }

func retryNodeToV1(c RetryNodeCmd) retryNodeCmdV1 { return retryNodeCmdV1(c) }

func retryNodeFromV1(_ *v1Decoder, c retryNodeCmdV1) RetryNodeCmd { return RetryNodeCmd(c) }

type agentRegisterCmdV1 struct {
	Cluster string    `json:"cluster"`
	Node    string    `json:"node"`
	Address string    `json:"address,omitempty"`
	Now     time.Time `json:"now"`
}

func (c AgentRegisterCmd) persistedV1() any { return agentRegisterToV1(c) }

func (c AgentRegisterCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *AgentRegisterCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, agentRegisterFromV1)
}

func agentRegisterToV1(c AgentRegisterCmd) agentRegisterCmdV1 { return agentRegisterCmdV1(c) }

func agentRegisterFromV1(_ *v1Decoder, c agentRegisterCmdV1) AgentRegisterCmd {
	return AgentRegisterCmd(c)
}

type agentHealthCmdV1 struct {
	Cluster    string    `json:"cluster"`
	Node       string    `json:"node"`
	Missing    bool      `json:"missing"`
	Healthy    bool      `json:"healthy"`
	Kubelet    string    `json:"kubelet,omitempty"`
	Containerd string    `json:"containerd,omitempty"`
	Now        time.Time `json:"now"`
	// StaticPods was added with observed static pods (0.2.0,
	// SinceStaticPods); a pointer so that "none running" ({}) and "not
	// carried" (absent) stay apart.
	StaticPods *map[string]string `json:"staticPods,omitempty"`
}

func (c AgentHealthCmd) persistedV1() any { return agentHealthToV1(c) }

func (c AgentHealthCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *AgentHealthCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, agentHealthFromV1) }

func agentHealthToV1(c AgentHealthCmd) agentHealthCmdV1 {
	v := agentHealthCmdV1{Cluster: c.Cluster, Node: c.Node, Missing: c.Missing, Healthy: c.Healthy,
		Kubelet: c.Kubelet, Containerd: c.Containerd, Now: c.Now}
	if c.StaticPods != nil {
		pods := maps.Clone(c.StaticPods)
		v.StaticPods = &pods
	}
	return v
}

func agentHealthFromV1(_ *v1Decoder, c agentHealthCmdV1) AgentHealthCmd {
	out := AgentHealthCmd{Cluster: c.Cluster, Node: c.Node, Missing: c.Missing, Healthy: c.Healthy,
		Kubelet: c.Kubelet, Containerd: c.Containerd, Now: c.Now}
	if c.StaticPods != nil {
		out.StaticPods = maps.Clone(*c.StaticPods)
		if out.StaticPods == nil {
			out.StaticPods = map[string]string{}
		}
	}
	return out
}

type setProtectionCmdV1 struct {
	Cluster string    `json:"cluster"`
	Upgrade string    `json:"upgrade"`
	Node    string    `json:"node"`
	Until   time.Time `json:"until"`
}

func (c SetProtectionCmd) persistedV1() any { return setProtectionToV1(c) }

func (c SetProtectionCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *SetProtectionCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, setProtectionFromV1)
}

func setProtectionToV1(c SetProtectionCmd) setProtectionCmdV1 { return setProtectionCmdV1(c) }

func setProtectionFromV1(_ *v1Decoder, c setProtectionCmdV1) SetProtectionCmd {
	return SetProtectionCmd(c)
}

type setPolicyCmdV1 struct {
	Cluster string    `json:"cluster"`
	Policy  policyV1  `json:"policy"`
	Now     time.Time `json:"now"`
}

func (c SetPolicyCmd) persistedV1() any { return setPolicyToV1(c) }

func (c SetPolicyCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *SetPolicyCmd) UnmarshalJSON(b []byte) error { return unmarshalV1(b, c, setPolicyFromV1) }

func setPolicyToV1(c SetPolicyCmd) setPolicyCmdV1 {
	return setPolicyCmdV1{Cluster: c.Cluster, Policy: policyToV1(c.Policy), Now: c.Now}
}

func setPolicyFromV1(_ *v1Decoder, c setPolicyCmdV1) SetPolicyCmd {
	return SetPolicyCmd{Cluster: c.Cluster, Policy: policyFromV1(c.Policy), Now: c.Now}
}

type preflightStartCmdV1 struct {
	Run preflightRunV1 `json:"run"`
}

func (c PreflightStartCmd) persistedV1() any { return preflightStartToV1(c) }

func (c PreflightStartCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *PreflightStartCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, preflightStartFromV1)
}

func preflightStartToV1(c PreflightStartCmd) preflightStartCmdV1 {
	return preflightStartCmdV1{Run: preflightRunToV1(c.Run)}
}

func preflightStartFromV1(d *v1Decoder, c preflightStartCmdV1) PreflightStartCmd {
	return PreflightStartCmd{Run: d.preflightRun(c.Run)}
}

type preflightResultCmdV1 struct {
	Cluster string            `json:"cluster"`
	Run     string            `json:"run"`
	Node    string            `json:"node"`
	Result  operationResultV1 `json:"result"`
}

func (c PreflightResultCmd) persistedV1() any { return preflightResultToV1(c) }

func (c PreflightResultCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *PreflightResultCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, preflightResultFromV1)
}

func preflightResultToV1(c PreflightResultCmd) preflightResultCmdV1 {
	return preflightResultCmdV1{Cluster: c.Cluster, Run: c.Run, Node: c.Node, Result: operationResultToV1(c.Result)}
}

func preflightResultFromV1(_ *v1Decoder, c preflightResultCmdV1) PreflightResultCmd {
	return PreflightResultCmd{Cluster: c.Cluster, Run: c.Run, Node: c.Node, Result: operationResultFromV1(c.Result)}
}

type preflightFinishCmdV1 struct {
	Cluster string            `json:"cluster"`
	Run     string            `json:"run"`
	Report  preflightReportV1 `json:"report"`
	Now     time.Time         `json:"now"`
}

func (c PreflightFinishCmd) persistedV1() any { return preflightFinishToV1(c) }

func (c PreflightFinishCmd) MarshalJSON() ([]byte, error) { return json.Marshal(c.persistedV1()) }

func (c *PreflightFinishCmd) UnmarshalJSON(b []byte) error {
	return unmarshalV1(b, c, preflightFinishFromV1)
}

func preflightFinishToV1(c PreflightFinishCmd) preflightFinishCmdV1 {
	return preflightFinishCmdV1{Cluster: c.Cluster, Run: c.Run, Report: preflightReportToV1(c.Report), Now: c.Now}
}

func preflightFinishFromV1(_ *v1Decoder, c preflightFinishCmdV1) PreflightFinishCmd {
	return PreflightFinishCmd{Cluster: c.Cluster, Run: c.Run, Report: preflightReportFromV1(c.Report), Now: c.Now}
}
