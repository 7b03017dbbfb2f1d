package coordinator

import (
	"context"
	"fmt"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
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
	_, err := c.apply(ctx, statemachine.SetPolicyCmd{Cluster: cluster, Policy: p, Now: now})
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
	out := api.MaintenanceCheck{Allowed: d.Allowed, BlockedBy: d.BlockedBy, PauseReason: string(d.PauseReason), WindowEnds: d.WindowEnds}
	if out.BlockedBy == nil {
		out.BlockedBy = []string{}
	}
	if next, ok := cp.NextOpportunity(ch, at); ok {
		out.NextOpportunity = next
	}
	return out, nil
}

// policyAvailability is a cluster's policy as the planner asks it
// (phases.Availability): when may work of this kind on a target start?
type policyAvailability struct {
	p    *maintenance.Compiled
	kind maintenance.ChangeKind
}

func (a policyAvailability) NextStart(t phases.Target, at time.Time) (time.Time, bool) {
	return a.p.NextOpportunity(maintenance.Change{Target: maintenance.Target(t), Kind: a.kind}, at)
}

// gateFor returns the gate of an upgrade (schedule.Gate): open for manual
// upgrades, emergency patches and automatic upgrades forced by an end of
// support; the policy's for other automatic upgrades. A stored policy that
// no longer compiles (it validated when stored) closes the gate rather
// than open it.
func gateFor(policy *maintenance.Policy, u *phases.Upgrade, now time.Time) phases.Gate {
	var cp *maintenance.Compiled
	invalid := false
	if policy != nil && u.Options.Automatic {
		var err error
		cp, err = policy.Compile()
		invalid = err != nil
	}
	return schedule.Gate(cp, invalid, u, now)
}
