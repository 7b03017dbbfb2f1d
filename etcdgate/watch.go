package etcdgate

import (
	"fmt"
	"time"
)

// Watch follows the gate over successive samples: it keeps the previous
// sample for the raft rule, and how long and why the gate held, for the
// operation's result.
type Watch struct {
	// Want is the member count before the node's upgrade (0: unchecked).
	Want int

	prev        *Sample
	first, last time.Time
	// lastHold is the reason of the newest sample that held.
	lastHold string
	holds    int
}

// Observe judges s after the samples observed before it.
func (w *Watch) Observe(s Sample) Decision {
	w.at(s.Time)
	d := Decide(w.Want, w.prev, s)
	if !d.Pass {
		w.holds++
		w.lastHold = d.Reason
	}
	prev := s
	w.prev = &prev
	return d
}

// Unreachable records a sample that could not be taken: the gate holds,
// and the raft rule keeps judging against the last sample taken.
func (w *Watch) Unreachable(at time.Time, err error) Decision {
	w.at(at)
	w.holds++
	w.lastHold = "etcd unreachable: " + err.Error()
	return Decision{Reason: w.lastHold}
}

func (w *Watch) at(t time.Time) {
	if w.first.IsZero() {
		w.first = t
	}
	w.last = t
}

// Held is how long the gate held: from the first sample to the last one.
// The first sample always holds (the raft rule needs two), so a cluster
// fit at once holds for one sampling interval plus the sampling itself.
func (w *Watch) Held() time.Duration {
	return w.last.Sub(w.first)
}

// Summary says how long the gate held and the last reason it gave,
// leaving out the first sample's, which every run gives.
func (w *Watch) Summary() string {
	if w.holds <= 1 || w.lastHold == firstSampleReason {
		return fmt.Sprintf("held %s (the first sample only, which every run holds)", w.Held().Round(time.Millisecond))
	}
	return fmt.Sprintf("held %s over %d samples; last: %s", w.Held().Round(time.Millisecond), w.holds, w.lastHold)
}
