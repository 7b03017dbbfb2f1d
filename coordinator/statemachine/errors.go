package statemachine

import (
	"errors"
)

// Sentinel errors that apply functions and queries return, wrapped with %w.
// Package coordinator re-exports each under the same name; the HTTP layer
// maps each to a status and problem type in one place.
var (
	ErrNotFound          = errors.New("not found")
	ErrInvalid           = errors.New("invalid request")
	ErrUpgradeInProgress = errors.New("an upgrade is in progress")
	ErrNoUpgrade         = errors.New("no upgrade in progress")
	ErrUnknownVersion    = errors.New("version not in the release catalog")
	ErrCommandNotAllowed = errors.New("command not allowed")
	// ErrUnauthenticated: a credential is unknown, expired or used up.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the caller is known but may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrConflict: the thing to create exists already.
	ErrConflict = errors.New("conflict")
	// ErrPolicyInvalid is wrapped by maintenance-policy refusals.
	ErrPolicyInvalid = errors.New("invalid maintenance policy")
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
