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
	// ErrUnauthorized refuses an agent whose join token does not match.
	ErrUnauthorized = errors.New("unauthorized")
)
