package schedule

import (
	"time"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// PauseReasonPolicyInvalid is the pause reason of an automatic upgrade
// whose cluster's stored policy no longer compiles.
const PauseReasonPolicyInvalid = "MAINTENANCE_POLICY_INVALID"

// Gate returns the gate phases.Decide runs an upgrade's steps through:
// open for manual upgrades, emergency patches and automatic upgrades
// forced by an end of support; the cluster's maintenance policy for other
// automatic upgrades, judged at now for the upgrade's kind of change. A
// stored policy that no longer compiles (invalid) closes the gate rather
// than open it. policy nil and invalid false mean no policy: open.
func Gate(policy *maintenance.Compiled, invalid bool, u *phases.Upgrade, now time.Time) phases.Gate {
	if !u.Options.Automatic || u.Options.EmergencyReason != "" || u.Options.EndOfSupport {
		return phases.Open
	}
	if invalid {
		return closedGate{reason: PauseReasonPolicyInvalid}
	}
	if policy == nil {
		return phases.Open
	}
	return policyGate{p: policy, kind: KindOf(u.From, u.To), now: now}
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

type closedGate struct{ reason string }

func (g closedGate) Allow(phases.Target) (bool, string) { return false, g.reason }
