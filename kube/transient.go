package kube

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Transient reports whether a failed API call may succeed if repeated
// unchanged: the API server could not be reached (connection refused or
// reset, a timeout) or answered that it is overloaded, unavailable or
// failing (429, 5xx). Upgrading a node can make the API briefly
// unreachable on its own — the control-plane load balancer's host, or an
// API server behind it, restarting — so waits that follow such a step keep
// going through these. Refusals that repeating cannot change (401, 403,
// 400, 422, 404 of a kind) are not transient, nor is the caller's context
// ending.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer from the API server at all
	}
	switch {
	case apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
		return true
	}
	return status.Status().Code >= 500
}
