package coordinator

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
)

// Hooks for the external tests of this package.

// ConnectCluster connects to cluster as the leader's work does, with its
// kubeconfig as stored (opened when sealed).
func (c *Coordinator) ConnectCluster(cluster string) (ClusterOps, error) {
	r, err := c.sm.Cluster(cluster)
	if err != nil {
		return nil, err
	}
	return c.clusterOps(cluster, r.StoredKubeconfig())
}

// StoredKubeconfig returns a cluster's kubeconfig as the replicated state
// holds it: sealed, and plain (from entries older than sealing).
func (c *Coordinator) StoredKubeconfig(cluster string) (sealed, plain string) {
	r, err := c.sm.Cluster(cluster)
	if err != nil {
		return "", ""
	}
	return r.KubeconfigSealed, r.Kubeconfig
}

// StateWithoutAudit is the replicated state's snapshot without the audit
// log: what a refused request must leave exactly as it was.
func (c *Coordinator) StateWithoutAudit() (string, error) {
	snap, err := c.sm.Snapshot()
	if err != nil {
		return "", err
	}
	_, body, _ := bytes.Cut(snap, []byte("\n"))
	var st map[string]json.RawMessage
	if err := json.Unmarshal(body, &st); err != nil {
		return "", err
	}
	for _, k := range []string{"audit", "auditLog", "agentAuditLog", "auditSeq"} {
		delete(st, k)
	}
	b, err := json.Marshal(st)
	return string(b), err
}

// OnAutoStart calls fn with every start decision this member commits as
// leader.
func (c *Coordinator) OnAutoStart(fn func(statemachine.AutoStartCmd)) { c.autoStarted.Store(&fn) }

// Propose commits a command through this member's store, as the leader's
// own decisions are.
func (c *Coordinator) Propose(ctx context.Context, cmd statemachine.Command) (any, error) {
	return c.apply(ctx, cmd)
}

// MemberRecords is the replicated record of members' capabilities, as
// this member applied it.
func (c *Coordinator) MemberRecords() map[string]api.MemberCapabilities { return c.sm.MemberRecords() }

// ApplyForTest proposes cmd as the coordinator's own writes do: through
// the capability gate.
func (c *Coordinator) ApplyForTest(ctx context.Context, cmd statemachine.Command) (any, error) {
	return c.apply(ctx, cmd)
}

// AskMembersNow makes the leader ask every member what it reads now.
func (c *Coordinator) AskMembersNow() { c.kickMembers() }
