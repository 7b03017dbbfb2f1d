package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
)

// problemFor maps an error to its problem. This is the only place that
// decides status codes and problem types.
func problemFor(err error) *api.Problem {
	detail := err.Error()
	var refused *raftstore.RefusedError
	if errors.As(err, &refused) {
		// "command N at index M" is for the member's log, not clients.
		detail = refused.Err.Error()
	}
	p := func(status int, suffix, title, rule string) *api.Problem {
		return &api.Problem{Type: api.ProblemTypeBase + suffix, Title: title, Status: status, Detail: detail, Rule: rule}
	}
	var pe *api.Problem
	if errors.As(err, &pe) {
		return pe
	}
	var vr *phases.RuleError
	if errors.As(err, &vr) {
		suffix := vr.Rule
		switch vr.Rule {
		case phases.RuleDowngrade:
			suffix = api.ProblemVersionDowngrade
		case phases.RuleSkipMinor:
			suffix = api.ProblemVersionSkipMinor
		case phases.RuleSame:
			suffix = api.ProblemVersionSame
		case phases.RuleAdminSkew, phases.RuleUserAhead:
			suffix = api.ProblemAdminSkew
		}
		return p(http.StatusUnprocessableEntity, suffix, "Version rule refused the upgrade", vr.Rule)
	}
	var ve *phases.ValidationError
	if errors.As(err, &ve) {
		return p(http.StatusUnprocessableEntity, api.ProblemValidation, "Invalid cluster", ve.Rule)
	}
	rule := ""
	var ce *coordinator.RuleError
	if errors.As(err, &ce) {
		rule = ce.Rule
	}
	switch {
	case errors.Is(err, phases.ErrInvalidVersion) || rule == phases.RuleInvalid:
		return p(http.StatusUnprocessableEntity, api.ProblemVersionInvalid, "Invalid version", phases.RuleInvalid)
	case errors.Is(err, errBadRequest):
		return p(http.StatusBadRequest, api.ProblemValidation, "Malformed request", "request-body")
	case errors.Is(err, errTooLarge):
		return p(http.StatusRequestEntityTooLarge, api.ProblemBodyTooLarge, "Request body too large", "request-body")
	case errors.Is(err, errMediaType):
		return p(http.StatusUnsupportedMediaType, api.ProblemUnsupportedMedia, "Unsupported media type", "content-type")
	case errors.Is(err, coordinator.ErrUnknownVersion):
		return p(http.StatusUnprocessableEntity, api.ProblemVersionUnknown, "Version not in the release catalog", rule)
	case errors.Is(err, coordinator.ErrNotFound):
		return p(http.StatusNotFound, api.ProblemNotFound, "Not found", rule)
	case errors.Is(err, coordinator.ErrUpgradeInProgress):
		return p(http.StatusConflict, api.ProblemUpgradeInProgress, "An upgrade is in progress", "one-upgrade-at-a-time")
	case errors.Is(err, coordinator.ErrNoUpgrade):
		return p(http.StatusConflict, api.ProblemNoUpgrade, "No upgrade in progress", rule)
	case errors.Is(err, coordinator.ErrCommandNotAllowed):
		return p(http.StatusConflict, api.ProblemCommandNotAllowed, "Command not allowed now", rule)
	case errors.Is(err, coordinator.ErrUnauthorized):
		return p(http.StatusUnauthorized, api.ProblemUnauthorized, "Unauthorized", rule)
	case errors.Is(err, coordinator.ErrForbidden):
		return p(http.StatusForbidden, api.ProblemForbidden, "Forbidden", rule)
	case errors.Is(err, coordinator.ErrConflict):
		return p(http.StatusConflict, api.ProblemConflict, "Conflict", rule)
	case errors.Is(err, coordinator.ErrInvalid):
		return p(http.StatusUnprocessableEntity, api.ProblemValidation, "Invalid request", rule)
	case errors.Is(err, coordinator.ErrPolicyInvalid):
		return p(http.StatusUnprocessableEntity, api.ProblemPolicyInvalid, "Invalid maintenance policy", rule)
	case errors.Is(err, phases.ErrStale):
		return p(http.StatusConflict, api.ProblemConflict, "State changed; try again", "stale")
	case errors.As(err, new(errLagging)):
		var lag errLagging
		errors.As(err, &lag)
		if lag.credential {
			return p(http.StatusServiceUnavailable, api.ProblemLagging, "Member behind the leader", lag.rule())
		}
		return p(http.StatusServiceUnavailable, api.ProblemLagging, "Member behind the client's last read", lag.rule())
	case errors.Is(err, raftstore.ErrHalted):
		return p(http.StatusServiceUnavailable, api.ProblemUnavailable, "Member stopped applying the log; it needs a newer molt", "member-halted")
	case errors.Is(err, raftstore.ErrNotLeader):
		return p(http.StatusServiceUnavailable, api.ProblemNotLeader, "Not the leader", "")
	case errors.Is(err, raftstore.ErrLeaderNotFound), errors.Is(err, errNoLeader):
		return p(http.StatusServiceUnavailable, api.ProblemNoLeader, "No leader", rule)
	case errors.Is(err, raftstore.ErrTimeout), errors.Is(err, raftstore.ErrLeadershipLost), errors.Is(err, raftstore.ErrClosed):
		return p(http.StatusServiceUnavailable, api.ProblemUnavailable, "Unavailable; the outcome of a write is unknown", "")
	case errors.Is(err, errTooManyPolls), errors.Is(err, errTooManySessions):
		return p(http.StatusTooManyRequests, api.ProblemTooManyRequests, "Too many requests", rule)
	}
	return p(http.StatusInternalServerError, api.ProblemInternal, "Internal error", "")
}

func writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	pr := problemFor(err)
	pr.Instance = r.URL.Path
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(pr.Status)
	_ = json.NewEncoder(w).Encode(pr)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func jsonEncode(w http.ResponseWriter, v any) error { return json.NewEncoder(w).Encode(v) }
