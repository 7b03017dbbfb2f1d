package coordinator

import (
	"sync"
	"time"

	"github.com/moltproject/molt/raftstore"
)

// The watchdog's view of a member (docs/agent.md, "Watchdog"):
// molt-coordinator pings systemd's watchdog only while Healthy is true, so
// systemd restarts a member whose Raft apply loop stopped.
//
// What is judged is the apply loop — Raft's FSM goroutine, which applies
// every committed entry to the state machine: when it stops, no write
// commits for any client, the leader loop blocks on its first commit, and
// the member's replica falls behind for good, while the process still
// answers and its Raft heartbeats keep it in the cluster. Progress is read
// from the FSM's own call counter (raftstore.Store.FSMCall), not from
// Raft's applied index: Raft counts an entry applied once it is handed to
// the FSM goroutine's queue, and its no-op and configuration entries never
// reach the FSM, so its applied and commit indexes neither show a stuck
// FSM nor match the FSM's index when all is well. The counter does: a call
// (Apply, Snapshot, Restore) in progress for longer than the bound is a
// loop that stopped; between calls — nothing committed to apply, however
// long — is idle and healthy.
//
// The leader loop is not judged on its own: each of its waits is bounded
// (a commit or barrier by ApplyTimeout, its sleep by TickInterval), but a
// tick commits once per upgrading cluster and per agent whose liveness
// changed, so how long a healthy tick takes grows with the fleet and no
// fixed bound tells it from a wedged one; what it waits on that can stop
// for good is the apply loop.

// applyBound is the longest one FSM call may take: ApplyTimeout, after
// which every write waiting on it has failed anyway.
func (c *Coordinator) applyBound() time.Duration {
	if d := c.cfg.Raft.ApplyTimeout; d > 0 {
		return d
	}
	return raftstore.DefaultConfig().ApplyTimeout
}

// Healthy reports whether the member's apply loop makes progress: no call
// of Raft's FSM goroutine into the state machine has been in progress for
// longer than applyBound plus WatchdogSlack. It is meant to be called at
// the watchdog's pings (it samples the loop; see applyWatch).
func (c *Coordinator) Healthy() bool {
	stuck, d := c.applies.sample(c.store.FSMCall(), c.cfg.Clock.Now(), c.applyBound()+c.cfg.WatchdogSlack)
	if stuck {
		c.log.Error("raft apply loop made no progress within its bound; the watchdog is not pinged", "call_in_progress_for", d.Round(time.Millisecond))
	}
	return !stuck
}

// applyWatch judges the apply loop from samples of the number of the FSM
// call in progress (raftstore.Store.FSMCall): the same call seen in
// progress across more than the bound is a loop that stopped.
type applyWatch struct {
	mu    sync.Mutex
	call  uint64    // the call in progress at the last sample; 0: none
	since time.Time // when that call was first seen in progress
}

// sample records that call (0: none) is in progress at now, and reports
// whether that same call has been seen in progress for longer than bound,
// with how long. A call that started between two samples is timed from
// the first sample that sees it, so a stop is found at most one sampling
// interval late.
func (w *applyWatch) sample(call uint64, now time.Time, bound time.Duration) (bool, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if call == 0 || call != w.call {
		w.call, w.since = call, now
		return false, 0
	}
	d := now.Sub(w.since)
	return d > bound, d
}
