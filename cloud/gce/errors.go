package gce

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/api/googleapi"

	"github.com/moltproject/molt/cloud"
)

// Error is a Compute API call, operation or instance creation that failed,
// as the adapter classified it. errors.Is finds the cloud sentinel (Kind)
// and the client's *googleapi.Error (Err) through it.
type Error struct {
	// Call is the API method ("instanceGroupManagers.createInstances"),
	// or "instance <name>" for an instance's last creation attempt.
	Call string
	// Status is the HTTP status of the response or of the operation
	// (0 when there was none).
	Status int
	// Code is the first error reason ("quotaExceeded") or operation
	// error code ("ZONE_RESOURCE_POOL_EXHAUSTED") the API gave.
	Code    string
	Message string
	// Kind is the cloud sentinel the error was classified as; nil when
	// none applies (a permission error, an unknown code).
	Kind error
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("gce: ")
	b.WriteString(e.Call)
	b.WriteString(":")
	if e.Status != 0 {
		fmt.Fprintf(&b, " %d", e.Status)
	}
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Kind != nil {
		b.WriteString(" (" + e.Kind.Error() + ")")
	}
	return b.String()
}

// Unwrap returns the sentinel and the underlying error.
func (e *Error) Unwrap() []error {
	var out []error
	for _, err := range []error{e.Kind, e.Err} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// codeKinds classifies error reasons (HTTP responses) and codes
// (operations, instances' last attempts). The first code of an error that
// has a kind decides; rate limits come before quota, since their messages
// speak of quota too. Quota and stockout codes are those of
// cluster-autoscaler's GCE provider.
var codeKinds = []struct {
	match func(code string) bool
	kind  error
}{
	{oneOf("rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"), cloud.ErrTransient},
	{func(c string) bool { return strings.Contains(strings.ToUpper(c), "QUOTA") }, cloud.ErrQuota},
	{oneOf("ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "RESOURCE_POOL_EXHAUSTED", "INSUFFICIENT_CAPACITY"), cloud.ErrStockout},
	{oneOf("notFound", "RESOURCE_NOT_FOUND"), cloud.ErrNotFound},
	{oneOf("alreadyExists", "RESOURCE_ALREADY_EXISTS", "resourceInUseByAnotherResource", "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", "conditionNotMet", "CONDITION_NOT_MET"), cloud.ErrConflict},
	{oneOf("resourceNotReady", "RESOURCE_NOT_READY", "backendError", "internalError", "INTERNAL_ERROR"), cloud.ErrTransient},
	{oneOf("invalid", "badRequest", "required", "invalidParameter", "INVALID_FIELD_VALUE", "INVALID_USAGE", "REQUIRED_FIELD_MISSING"), cloud.ErrInvalid},
}

func oneOf(codes ...string) func(string) bool {
	return func(c string) bool {
		for _, x := range codes {
			if c == x {
				return true
			}
		}
		return false
	}
}

// codeKind is the sentinel of one code, nil if none.
func codeKind(code string) error {
	for _, k := range codeKinds {
		if k.match(code) {
			return k.kind
		}
	}
	return nil
}

// statusKind is the sentinel of an HTTP status whose reasons did not
// decide: 404 not found, 409 and 412 conflict, 429 and 5xx transient, 400
// invalid. A 403 that is neither quota nor rate limit (a permission
// error) has none.
func statusKind(status int) error {
	switch {
	case status == http.StatusNotFound:
		return cloud.ErrNotFound
	case status == http.StatusConflict, status == http.StatusPreconditionFailed:
		return cloud.ErrConflict
	case status == http.StatusTooManyRequests, status >= 500:
		return cloud.ErrTransient
	case status == http.StatusBadRequest:
		return cloud.ErrInvalid
	}
	return nil
}

// classify turns an error of the Compute client into an *Error. Errors
// of ctx (the caller's cancellation or deadline) are returned as they
// are; an error that never reached an HTTP status (a connection refused
// or reset) is transient.
func classify(ctx context.Context, call string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("gce: %s: %w", call, ctx.Err())
	}
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) {
		return &Error{Call: call, Message: err.Error(), Kind: cloud.ErrTransient, Err: err}
	}
	e := &Error{Call: call, Status: gerr.Code, Message: gerr.Message, Err: err}
	for _, item := range gerr.Errors {
		if e.Code == "" {
			e.Code = item.Reason
		}
		if k := codeKind(item.Reason); k != nil {
			e.Code, e.Kind = item.Reason, k
			break
		}
	}
	if e.Kind == nil {
		e.Kind = statusKind(gerr.Code)
	}
	return e
}

// codeError classifies an error code and message of an operation or an
// instance's last attempt.
func codeError(call string, status int, codes, messages []string) *Error {
	e := &Error{Call: call, Status: status}
	for i, c := range codes {
		if i == 0 {
			e.Code, e.Message = c, messages[i]
		}
		if k := codeKind(c); k != nil {
			e.Code, e.Message, e.Kind = c, messages[i], k
			break
		}
	}
	if e.Kind == nil && status != 0 {
		e.Kind = statusKind(status)
	}
	return e
}

// isAlreadyExists reports whether err says the resource exists already.
func isAlreadyExists(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == "alreadyExists" || e.Code == "RESOURCE_ALREADY_EXISTS" ||
		e.Status == http.StatusConflict && e.Code == "")
}
