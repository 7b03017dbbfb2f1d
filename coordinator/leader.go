package coordinator

import (
	"context"
	"time"
)

// leader is the runtime of one leadership term: the leader loop (lead),
// its ticks (tick.go), the work they start (work.go, migwork.go,
// cloudwait.go, the gates of gates.go, a preflight run's work in
// preflightwork.go) and the scheduler's passes (scheduler.go). startTerm makes a new one for every
// term, so nothing of a term's memory reaches the next; what outlives a
// term — the replica, the store, the dispatcher of agents' polls, agents'
// liveness, the cluster connections — is the member's (the embedded
// Coordinator), which the request service shares. Everything it starts
// runs under the term's context (term.go).
type leader struct {
	*Coordinator
	// sched is the scheduler's memory between passes (scheduler.go).
	sched schedState
}

// startTerm begins a leadership term: the dispatcher serves agents' polls
// again and a new leader's loop starts under the term.
func (c *Coordinator) startTerm(parent context.Context) *term {
	t := newTerm(parent, c.cfg.MaxConcurrentWork, c.poke)
	c.dispatch.serve()
	l := &leader{Coordinator: c}
	t.goLoop(l.lead)
	t.goLoop(c.watchMembers)
	return t
}

// endTerm ends a leadership term. The dispatcher stops serving first, so
// agents' long polls return at once (not leader) and go to the new leader
// while this member still waits for its work to return.
func (c *Coordinator) endTerm(t *term) {
	c.dispatch.stop()
	t.end()
}

// lead is the leader loop: a barrier so the replica has applied every
// committed entry, then a tick on every change, at the earliest time a
// decision changes by itself (phases.Decision.NextWake), and at least every
// TickInterval.
func (l *leader) lead(ctx context.Context) {
	log := l.log.With("role", "leader")
	for {
		if err := l.store.Barrier(ctx); err == nil {
			break
		} else if ctx.Err() != nil {
			return
		} else {
			log.Warn("barrier failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	l.live.reset(l.cfg.Clock.Now())
	l.ensureBootstrapAdmin(ctx)
	if l.cfg.Recorder != nil {
		l.cfg.Recorder.LeaderChange()
	}
	log.Info("leading")
	timer := time.NewTimer(l.cfg.TickInterval)
	defer timer.Stop()
	for {
		again, sleep := l.tick(ctx)
		if again && ctx.Err() == nil {
			continue
		}
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			log.Info("no longer leading")
			return
		case <-l.wake:
		case <-timer.C:
		}
	}
}
