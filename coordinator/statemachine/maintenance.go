package statemachine

import (
	"errors"
	"fmt"
	"time"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// SetPolicyCmd (CmdSetPolicy) stores a cluster's maintenance policy.
type SetPolicyCmd struct {
	Cluster string
	Policy  maintenance.Policy
	Now     time.Time
}

// policyContext is what validating a cluster's policy depends on: whether
// it follows a release channel, and when its current minor's support ends
// (the latest end of support among catalog releases of that minor).
func (s *state) policyContext(r *ClusterRecord, now time.Time) maintenance.ValidationContext {
	return s.policyContextFor(r.Spec.Channel, r.StatusVersion, now)
}

// policyContextFor is policyContext for a cluster on channel that runs
// version: a registration's policy is judged on the spec it comes with.
func (s *state) policyContextFor(channel string, version phases.Version, now time.Time) maintenance.ValidationContext {
	ctx := maintenance.ValidationContext{Now: now, OnReleaseChannel: channel != ""}
	for _, rel := range s.Releases {
		v, err := phases.ParseVersion(rel.Version)
		if err == nil && v.SameMinor(version) && rel.EndOfSupport.After(ctx.EndOfSupport) {
			ctx.EndOfSupport = rel.EndOfSupport
		}
	}
	return ctx
}

// PolicyError turns a refusal of package maintenance into a RuleError
// wrapping ErrPolicyInvalid; other errors (and nil) pass unchanged.
func PolicyError(err error) error {
	var re *maintenance.RuleError
	if errors.As(err, &re) {
		return &RuleError{Rule: re.Rule, Detail: re.Detail, Err: ErrPolicyInvalid}
	}
	return err
}

func (s *state) setPolicy(c SetPolicyCmd) (any, error) {
	r, err := s.cluster(c.Cluster)
	if err != nil {
		return nil, err
	}
	p, err := s.validPolicy(c.Policy, s.policyContext(r, c.Now))
	if err != nil {
		return nil, err
	}
	storePolicy(r, p)
	s.audit(AuditEntry{Time: c.Now, Cluster: c.Cluster, Action: "maintenance-policy", Detail: fmt.Sprintf("window=%v exclusions=%d", p.Window != nil, len(p.Exclusions))})
	return nil, nil
}

// validPolicy returns p in its stored form, or the rule it breaks.
func (s *state) validPolicy(p maintenance.Policy, ctx maintenance.ValidationContext) (*maintenance.Policy, error) {
	p = maintenance.Normalize(p)
	if err := p.Validate(ctx); err != nil {
		return nil, PolicyError(err)
	}
	return &p, nil
}

// storePolicy replaces the cluster's policy with a valid one. Any policy
// ends the registration hold: its operator has said when the cluster may
// be upgraded.
func storePolicy(r *ClusterRecord, p *maintenance.Policy) {
	r.Policy = p
	r.Auto.HeldUntil = time.Time{}
}
