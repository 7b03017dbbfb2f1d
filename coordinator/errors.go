package coordinator

import (
	"errors"
)

// Sentinel errors. The HTTP layer maps each to a status and problem type in
// one place; everything else wraps them with %w.
var (
	ErrNotFound          = errors.New("not found")
	ErrInvalid           = errors.New("invalid request")
	ErrUpgradeInProgress = errors.New("an upgrade is in progress")
	ErrNoUpgrade         = errors.New("no upgrade in progress")
	ErrUnknownVersion    = errors.New("version not in the release catalog")
	ErrCommandNotAllowed = errors.New("command not allowed")
	ErrUnauthorized      = errors.New("unauthorized")
)

// RuleError is a refusal naming the rule it enforces, for refusals that are
// not version rules (those come from phases).
type RuleError struct {
	Rule   string
	Detail string
	Err    error
}

func (e *RuleError) Error() string { return e.Rule + ": " + e.Detail }

// Unwrap returns the sentinel.
func (e *RuleError) Unwrap() error { return e.Err }

// ErrPolicyInvalid is wrapped by maintenance-policy refusals.
var ErrPolicyInvalid = errors.New("invalid maintenance policy")
