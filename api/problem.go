package api

import (
	"errors"
	"fmt"
	"strings"
)

// ProblemTypeBase prefixes every problem type URI molt answers with.
const ProblemTypeBase = "https://molt.dev/problems/"

// Problem is an RFC 9457 problem detail. Type ends in a stable suffix (see
// the Problem* constants) that clients may switch on; Rule names the rule
// that refused the request when one did.
type Problem struct {
	Type     string         `json:"type"`
	Title    string         `json:"title"`
	Status   int            `json:"status"`
	Detail   string         `json:"detail,omitempty"`
	Instance string         `json:"instance,omitempty"`
	Rule     string         `json:"rule,omitempty"`
	Extra    map[string]any `json:"extra,omitempty"`
}

// Stable problem type suffixes.
const (
	ProblemVersionDowngrade  = "version-downgrade"
	ProblemVersionSkipMinor  = "version-skip-minor"
	ProblemVersionUnknown    = "version-unknown"
	ProblemVersionInvalid    = "version-invalid"
	ProblemVersionSame       = "version-same"
	ProblemAdminSkew         = "admin-skew"
	ProblemUpgradeInProgress = "upgrade-in-progress"
	ProblemNoUpgrade         = "no-upgrade"
	ProblemNotFound          = "not-found"
	ProblemValidation        = "validation"
	ProblemNotLeader         = "not-leader"
	ProblemNoLeader          = "no-leader"
	ProblemLagging           = "lagging"
	ProblemConflict          = "conflict"
	ProblemPolicyInvalid     = "maintenance-policy-invalid"
	ProblemUnauthorized      = "unauthorized"
	ProblemForbidden         = "forbidden"
	ProblemMethodNotAllowed  = "method-not-allowed"
	ProblemBodyTooLarge      = "body-too-large"
	ProblemUnsupportedMedia  = "unsupported-media-type"
	ProblemCommandNotAllowed = "command-not-allowed"
	ProblemInternal          = "internal"
	// ProblemUnavailable: the member could not finish the request now
	// (Raft timed out, leadership was lost mid-write, the member is
	// shutting down); a write's outcome is unknown, so retry only what is
	// safe to repeat.
	ProblemUnavailable = "unavailable"
	// ProblemTooManyRequests: a limit on concurrent requests of one
	// caller (an agent's long poll) was reached.
	ProblemTooManyRequests = "too-many-requests"
)

// Suffix returns the stable suffix of the problem's type.
func (p *Problem) Suffix() string { return strings.TrimPrefix(p.Type, ProblemTypeBase) }

// Error makes a Problem usable as an error on the client side.
func (p *Problem) Error() string {
	if p.Rule != "" {
		return fmt.Sprintf("%s (%d, rule %s): %s", p.Suffix(), p.Status, p.Rule, p.Detail)
	}
	return fmt.Sprintf("%s (%d): %s", p.Suffix(), p.Status, p.Detail)
}

// IsProblem reports whether err is a Problem with the given type suffix.
func IsProblem(err error, suffix string) bool {
	var p *Problem
	return errors.As(err, &p) && p.Suffix() == suffix
}
