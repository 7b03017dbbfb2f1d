package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// SetPolicy validates and stores a cluster's maintenance policy. An invalid
// policy is refused naming its rule, and the stored one stays as it was.
func (c *Coordinator) SetPolicy(ctx context.Context, cluster string, p maintenance.Policy) error {
	now := c.cfg.Clock.Now()
	if err := c.sm.ValidatePolicy(cluster, p, now); err != nil {
		return err
	}
	noteAudit(ctx, func(r *AuditRecord) {
		r.Detail = fmt.Sprintf("window: %v, exclusions: %d", p.Window != nil, len(p.Exclusions))
	})
	_, err := c.apply(ctx, statemachine.CmdSetPolicy, statemachine.SetPolicyCmd{Cluster: cluster, Policy: p, Now: now})
	return err
}

// Policy returns a cluster's maintenance policy (empty: always open).
func (c *Coordinator) Policy(cluster string) (maintenance.Policy, error) {
	return c.sm.Policy(cluster)
}

// CheckMaintenance answers whether a change may run at a time, and when
// it next may. A zero at means now, on the member's clock (Config.Clock).
func (c *Coordinator) CheckMaintenance(cluster string, ch maintenance.Change, at time.Time) (api.MaintenanceCheck, error) {
	if at.IsZero() {
		at = c.cfg.Clock.Now()
	}
	p, err := c.Policy(cluster)
	if err != nil {
		return api.MaintenanceCheck{}, err
	}
	cp, err := p.Compile()
	if err != nil {
		return api.MaintenanceCheck{}, statemachine.PolicyError(err)
	}
	d := cp.Allowed(ch, at)
	out := api.MaintenanceCheck{Allowed: d.Allowed, BlockedBy: d.BlockedBy, PauseReason: string(d.PauseReason)}
	if out.BlockedBy == nil {
		out.BlockedBy = []string{}
	}
	if next, ok := cp.NextOpportunity(ch, at); ok {
		out.NextOpportunity = next
	}
	return out, nil
}

// policyGate gates an automatic upgrade's steps by the cluster's policy.
type policyGate struct {
	p    *maintenance.Compiled
	kind maintenance.ChangeKind
	now  time.Time
}

func (g policyGate) Allow(t phases.Target) (bool, string) {
	d := g.p.Allowed(maintenance.Change{Target: maintenance.Target(t), Kind: g.kind}, g.now)
	return d.Allowed, string(d.PauseReason)
}

// gateFor returns the gate of an upgrade: open for manual upgrades and
// emergency patches, the policy's for automatic upgrades. A stored policy
// that no longer compiles (it validated when stored) closes the gate rather
// than open it.
func gateFor(policy *maintenance.Policy, u *phases.Upgrade, now time.Time) phases.Gate {
	if !u.Options.Automatic || u.Options.EmergencyReason != "" || policy == nil {
		return phases.Open
	}
	cp, err := policy.Compile()
	if err != nil {
		return closedGate{reason: "MAINTENANCE_POLICY_INVALID"}
	}
	kind := maintenance.KindPatch
	if u.To.Minor != u.From.Minor {
		kind = maintenance.KindMinor
	}
	return policyGate{p: cp, kind: kind, now: now}
}

type closedGate struct{ reason string }

func (g closedGate) Allow(phases.Target) (bool, string) { return false, g.reason }
