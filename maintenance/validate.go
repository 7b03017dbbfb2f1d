package maintenance

import (
	"time"
)

// ValidationContext is what Validate needs to know about the cluster and
// the moment of validation.
type ValidationContext struct {
	// Now is the instant of validation: expired exclusions stop counting
	// and the availability rule is checked from here on.
	Now time.Time
	// OnReleaseChannel is true when the cluster follows a release
	// channel; only then are scopes other than no_upgrades accepted.
	OnReleaseChannel bool
	// EndOfSupport is the end-of-support date of the cluster's current
	// minor; zero means unknown and skips that rule.
	EndOfSupport time.Time
}

// Validate checks the normalised form of p against every rule of SPEC §9
// and returns the first broken one as a *RuleError wrapping
// ErrInvalidPolicy, or nil. Rules are checked in a fixed order (window,
// exclusion count, each exclusion, no_upgrades count, availability), so the
// same policy always reports the same rule.
func (p Policy) Validate(ctx ValidationContext) error {
	c, err := p.Compile()
	if err != nil {
		return err
	}
	n := c.policy
	now := ctx.Now.UTC()
	if len(n.Exclusions) > MaxExclusions {
		return ruleErr(RuleTooManyExclusions, "%d exclusions; at most %d", len(n.Exclusions), MaxExclusions)
	}
	seen := make(map[string]bool, len(n.Exclusions))
	noUpgrades := 0
	for i, e := range n.Exclusions {
		switch {
		case e.Name == "":
			return ruleErr(RuleExclusionNameMissing, "exclusion #%d has no name", i+1)
		case e.Name == BlockedByWindow:
			return ruleErr(RuleExclusionNameReserved, "exclusion name %q is reserved", e.Name)
		case seen[e.Name]:
			return ruleErr(RuleExclusionNameDuplicate, "exclusion name %q is used twice", e.Name)
		case !e.Scope.Known():
			return ruleErr(RuleUnknownScope, "exclusion %q: unknown scope %q", e.Name, e.Scope)
		case e.Scope != ScopeNoUpgrades && !ctx.OnReleaseChannel:
			return ruleErr(RuleScopeRequiresChannel,
				"exclusion %q: scope %q needs a cluster on a release channel", e.Name, e.Scope)
		case !ctx.EndOfSupport.IsZero() && e.End.After(ctx.EndOfSupport):
			return ruleErr(RuleExclusionAfterEndOfSupport,
				"exclusion %q ends %s, after the end of support of the cluster's minor (%s)",
				e.Name, e.End.Format(time.RFC3339), ctx.EndOfSupport.UTC().Format(time.RFC3339))
		}
		seen[e.Name] = true
		if e.Scope == ScopeNoUpgrades && e.End.After(now) {
			noUpgrades++
		}
	}
	if noUpgrades > MaxNoUpgradesExclusions {
		return ruleErr(RuleTooManyNoUpgrades, "%d no_upgrades exclusions have not ended; at most %d",
			noUpgrades, MaxNoUpgradesExclusions)
	}
	return c.checkAvailability(now)
}

// Admit checks a policy a request brings: Validate, and on top rules that
// stored policies are not held to, so that a policy accepted before them
// still compiles and a replayed log applies as it did. Today that is the
// RRULE's numbers: COUNT and INTERVAL, when given, are whole numbers of
// at least 1 (RFC 5545), where the RRULE library reads COUNT=0 or a
// negative COUNT as no COUNT at all, and INTERVAL=0 as 1.
func (p Policy) Admit(ctx ValidationContext) error {
	n := Normalize(p)
	if n.Window != nil && n.Window.Recurrence != "" {
		if err := checkRecurrenceNumbers(n.Window.Recurrence); err != nil {
			return err
		}
	}
	return n.Validate(ctx)
}
