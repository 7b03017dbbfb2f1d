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
	ctx := maintenance.ValidationContext{Now: now, OnReleaseChannel: r.Spec.Channel != ""}
	for _, rel := range s.Releases {
		v, err := phases.ParseVersion(rel.Version)
		if err == nil && v.SameMinor(r.StatusVersion) && rel.EndOfSupport.After(ctx.EndOfSupport) {
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
	p := maintenance.Normalize(c.Policy)
	if err := p.Validate(s.policyContext(r, c.Now)); err != nil {
		return nil, PolicyError(err)
	}
	r.Policy = &p
	s.audit(AuditEntry{Time: c.Now, Cluster: c.Cluster, Action: "maintenance-policy", Detail: fmt.Sprintf("window=%v exclusions=%d", p.Window != nil, len(p.Exclusions))})
	return nil, nil
}
