// Package clock is the one time source of molt's packages that do I/O:
// the coordinator's leader loop and HTTP layer, the agent, the GCE
// adapter and the TLS accept loop take a Clock, so tests drive their
// deadlines, backoffs and rates with a Manual clock instead of waiting.
//
// Pure packages (phases, maintenance, schedule, preflight: see
// internal/purity) take no Clock at all: they receive the time as a value.
// Package kube keeps k8s.io/utils/clock, the clock of the client-go
// machinery it drives.
package clock

import "time"

// Clock reads the time and waits on it.
type Clock interface {
	Now() time.Time
	// After sends the time on the returned channel once d has passed.
	After(d time.Duration) <-chan time.Time
	// AfterFunc calls f once d has passed, unless stop is called first;
	// stop reports whether it prevented the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// Real is the wall clock.
type Real struct{}

func (Real) Now() time.Time                         { return time.Now() }
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (Real) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// UTC is the wall clock read in UTC: times that reach the Raft log and the
// wire then carry no local zone, whatever the host's.
type UTC struct{ Real }

func (UTC) Now() time.Time { return time.Now().UTC() }
