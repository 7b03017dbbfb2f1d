package cloud

import "errors"

// Sentinel errors. Adapters wrap them (fmt.Errorf("...: %w", ErrQuota))
// so callers decide with errors.Is, whatever the provider said.
var (
	// ErrQuota: the project's or zone's quota does not allow the
	// instances (GCE QUOTA_EXCEEDED). The caller waits and retries.
	ErrQuota = errors.New("quota exceeded")
	// ErrStockout: the zone has no capacity for the machine shape now
	// (GCE ZONE_RESOURCE_POOL_EXHAUSTED). The caller waits and retries.
	ErrStockout = errors.New("no capacity in the zone")
	// ErrNotFound: the group, instance or template does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the request conflicts with the resource's state (a
	// name taken by something else, a group changed under the request).
	ErrConflict = errors.New("conflict")
	// ErrTransient: the provider failed or was too slow (HTTP 429 or 5xx,
	// an operation past its deadline); the same call may be repeated.
	ErrTransient = errors.New("transient provider error")
	// ErrInvalid: the request itself is wrong (bad name, size, release).
	ErrInvalid = errors.New("invalid request")
)

// Retryable reports whether err is one a caller waits out and retries
// rather than a failure: quota, stockout and transient errors.
func Retryable(err error) bool {
	return errors.Is(err, ErrQuota) || errors.Is(err, ErrStockout) || errors.Is(err, ErrTransient)
}
