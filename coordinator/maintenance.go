package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// setPolicyCmd (cmdSetPolicy) stores a cluster's maintenance policy.
type setPolicyCmd struct {
	Cluster string             `json:"cluster"`
	Policy  maintenance.Policy `json:"policy"`
	Now     time.Time          `json:"now"`
}

// policyContext is what validating a cluster's policy depends on: whether
// it follows a release channel, and when its current minor's support ends
// (the latest end of support among catalog releases of that minor).
func (s *state) policyContext(r *clusterRecord, now time.Time) maintenance.ValidationContext {
	ctx := maintenance.ValidationContext{Now: now, OnReleaseChannel: r.Spec.Channel != ""}
	for _, rel := range s.Releases {
		v, err := phases.ParseVersion(rel.Version)
		if err == nil && v.SameMinor(r.StatusVersion) && rel.EndOfSupport.After(ctx.EndOfSupport) {
			ctx.EndOfSupport = rel.EndOfSupport
		}
	}
	return ctx
}

func policyErr(err error) error {
	var re *maintenance.RuleError
	if errors.As(err, &re) {
		return &RuleError{Rule: re.Rule, Detail: re.Detail, Err: ErrPolicyInvalid}
	}
	return err
}

func (s *state) setPolicy(c setPolicyCmd) (any, error) {
	r, err := s.cluster(c.Cluster)
	if err != nil {
		return nil, err
	}
	p := maintenance.Normalize(c.Policy)
	if err := p.Validate(s.policyContext(r, c.Now)); err != nil {
		return nil, policyErr(err)
	}
	r.Policy = &p
	s.audit(AuditEntry{Time: c.Now, Cluster: c.Cluster, Action: "maintenance-policy", Detail: fmt.Sprintf("window=%v exclusions=%d", p.Window != nil, len(p.Exclusions))})
	return nil, nil
}

// SetPolicy validates and stores a cluster's maintenance policy. An invalid
// policy is refused naming its rule, and the stored one stays as it was.
func (c *Coordinator) SetPolicy(ctx context.Context, cluster string, p maintenance.Policy) error {
	now := c.cfg.Clock.Now()
	var err error
	c.fsm.read(func(st *state) {
		var r *clusterRecord
		if r, err = st.cluster(cluster); err == nil {
			err = policyErr(maintenance.Normalize(p).Validate(st.policyContext(r, now)))
		}
	})
	if err != nil {
		return err
	}
	_, err = c.apply(ctx, cmdSetPolicy, setPolicyCmd{Cluster: cluster, Policy: p, Now: now})
	return err
}

// Policy returns a cluster's maintenance policy (empty: always open).
func (c *Coordinator) Policy(cluster string) (maintenance.Policy, error) {
	var out maintenance.Policy
	var err error
	c.fsm.read(func(st *state) {
		var r *clusterRecord
		if r, err = st.cluster(cluster); err == nil && r.Policy != nil {
			out = *r.Policy
		}
	})
	return out, err
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
		return api.MaintenanceCheck{}, policyErr(err)
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
func gateFor(r *clusterRecord, u *phases.Upgrade, now time.Time) phases.Gate {
	if !u.Options.Automatic || u.Options.EmergencyReason != "" || r.Policy == nil {
		return phases.Open
	}
	cp, err := r.Policy.Compile()
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
