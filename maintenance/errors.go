package maintenance

import (
	"errors"
	"fmt"
)

// ErrInvalidPolicy is wrapped by every *RuleError, so callers can map any
// policy refusal to one HTTP status with errors.Is.
var ErrInvalidPolicy = errors.New("invalid maintenance policy")

// Rule names are stable strings: the REST API returns them in problem+json
// so that scripts can react to a specific refusal.
const (
	RuleTimeOutOfRange             = "time-out-of-range"
	RuleWindowEndBeforeStart       = "window-end-before-start"
	RuleWindowRecurrenceInvalid    = "window-recurrence-invalid"
	RuleWindowFrequencyTooHigh     = "window-frequency-too-high"
	RuleTooManyExclusions          = "too-many-exclusions"
	RuleExclusionNameMissing       = "exclusion-name-missing"
	RuleExclusionNameReserved      = "exclusion-name-reserved"
	RuleExclusionNameDuplicate     = "exclusion-name-duplicate"
	RuleExclusionEndBeforeStart    = "exclusion-end-before-start"
	RuleUnknownScope               = "unknown-scope"
	RuleScopeRequiresChannel       = "scope-requires-channel"
	RuleExclusionAfterEndOfSupport = "exclusion-after-end-of-support"
	RuleTooManyNoUpgrades          = "too-many-no-upgrades-exclusions"
	RuleMaintenanceAvailability    = "maintenance-availability"
	RuleOverrideReasonRequired     = "override-reason-required"
)

// RuleError names the first rule a policy or override breaks and says why.
type RuleError struct {
	// Rule is one of the Rule* constants.
	Rule string
	// Detail is a human sentence naming the offending field or value.
	Detail string
}

// Error implements error.
func (e *RuleError) Error() string {
	return fmt.Sprintf("%s: %s: %s", ErrInvalidPolicy, e.Rule, e.Detail)
}

// Unwrap lets errors.Is(err, ErrInvalidPolicy) match.
func (e *RuleError) Unwrap() error { return ErrInvalidPolicy }

func ruleErr(rule, format string, args ...any) *RuleError {
	return &RuleError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}
