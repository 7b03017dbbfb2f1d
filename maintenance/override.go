package maintenance

import (
	"strings"
	"time"
)

// Override is an operator's emergency decision to push one version through
// closed windows and active exclusions (SPEC §9), typically a critical
// patch. The coordinator validates it, appends it to the audit trail, and
// then does not consult Allowed for that version: this package never looks
// at overrides, so the bypass stays visible at its single call site.
type Override struct {
	// Reason is mandatory: it is the audit trail's answer to "why".
	Reason string `json:"reason"`
	// By names the operator (the authenticated principal).
	By string `json:"by"`
	// At is when the override was given.
	At time.Time `json:"at"`
	// Version is the release the override lets through.
	Version string `json:"version"`
}

// Validate returns a *RuleError (rule override-reason-required) when the
// reason is blank.
func (o Override) Validate() error {
	if strings.TrimSpace(o.Reason) == "" {
		return ruleErr(RuleOverrideReasonRequired, "an emergency override needs a reason for the audit log")
	}
	return nil
}
