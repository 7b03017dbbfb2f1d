package coordinator

import (
	"context"
	"time"
)

// startTerm begins a leadership term: the dispatcher serves agents' polls
// again and the leader loop starts under the term.
func (c *Coordinator) startTerm(parent context.Context) *term {
	t := newTerm(parent, c.cfg.MaxConcurrentWork, c.poke)
	c.dispatch.serve()
	t.goLoop(c.lead)
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
func (c *Coordinator) lead(ctx context.Context) {
	log := c.log.With("role", "leader")
	for {
		if err := c.store.Barrier(ctx); err == nil {
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
	c.live.reset(c.cfg.Clock.Now())
	c.sched = schedState{}
	c.ensureBootstrapAdmin(ctx)
	if c.cfg.Recorder != nil {
		c.cfg.Recorder.LeaderChange()
	}
	log.Info("leading")
	timer := time.NewTimer(c.cfg.TickInterval)
	defer timer.Stop()
	for {
		again, sleep := c.tick(ctx)
		if again && ctx.Err() == nil {
			continue
		}
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			log.Info("no longer leading")
			return
		case <-c.wake:
		case <-timer.C:
		}
	}
}
