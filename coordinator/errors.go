package coordinator

import (
	"errors"

	"github.com/moltproject/molt/coordinator/statemachine"
)

// Sentinel errors. The HTTP layer maps each to a status and problem type in
// one place; everything else wraps them with %w. Those the state machine
// returns are defined there (one definition each) and re-exported here, so
// errors.Is works whichever package's name a caller uses.
var (
	ErrNotFound          = statemachine.ErrNotFound
	ErrInvalid           = statemachine.ErrInvalid
	ErrUpgradeInProgress = statemachine.ErrUpgradeInProgress
	ErrNoUpgrade         = statemachine.ErrNoUpgrade
	ErrUnknownVersion    = statemachine.ErrUnknownVersion
	ErrCommandNotAllowed = statemachine.ErrCommandNotAllowed
	// ErrPolicyInvalid is wrapped by maintenance-policy refusals.
	ErrPolicyInvalid = statemachine.ErrPolicyInvalid
	// ErrUnauthorized: no credential, or one that is unknown, expired,
	// used up or revoked (401).
	ErrUnauthorized = statemachine.ErrUnauthenticated
	// ErrForbidden: a known caller that may not do this (403).
	ErrForbidden = statemachine.ErrForbidden
	// ErrConflict: what is to be created exists already (409).
	ErrConflict = statemachine.ErrConflict
)

// ErrAPIUnavailable is wrapped by a ClusterOps error when the cluster's API
// server could not be reached, or answered that it is overloaded or
// unavailable: the same call may pass later unchanged. Cluster calls that
// fail with it are repeated for up to Config.APIUnavailableTimeout.
var ErrAPIUnavailable = errors.New("API server unavailable")
