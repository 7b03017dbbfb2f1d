package maintenance

import "strings"

// CheckOverrideReason returns a *RuleError (rule override-reason-required)
// when an emergency override's reason is blank: the reason is the audit
// trail's answer to "why", and blanks answer nothing. An override pushes one
// version through closed windows and active exclusions (SPEC §9); the
// coordinator records it in the audit log and then does not consult
// Allowed for that version. This package never looks at overrides, so the
// bypass stays visible at its single call site.
func CheckOverrideReason(reason string) error {
	if strings.TrimSpace(reason) == "" {
		return ruleErr(RuleOverrideReasonRequired, "an emergency override needs a reason for the audit log")
	}
	return nil
}
