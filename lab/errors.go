package lab

import "errors"

// Sentinel errors; every error the package returns wraps one of these.
var (
	// ErrTopology reports an invalid topology.
	ErrTopology = errors.New("lab topology")
	// ErrImage reports an image that could not be built.
	ErrImage = errors.New("lab image")
	// ErrNetwork reports a namespace, bridge or veth that could not be set up.
	ErrNetwork = errors.New("lab network")
	// ErrHost reports a host that did not boot or a command in it that failed.
	ErrHost = errors.New("lab host")
	// ErrNotReady reports a cluster that did not become ready in time.
	ErrNotReady = errors.New("lab not ready")
	// ErrMissing reports a binary or cache entry the lab needs that is absent.
	ErrMissing = errors.New("lab missing input")
)
