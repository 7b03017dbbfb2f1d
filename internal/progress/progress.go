// Package progress records when each of a daemon's loops last made
// progress, so that the daemon pings systemd's watchdog only while every
// loop does (systemd.Watchdog's healthy function). A loop that stopped
// making progress — blocked on a lock, a channel or a call that never
// returns — then stops the pings, and systemd restarts the process, though
// the goroutine that pings still runs.
//
// Time comes in through a clock function, so the rules are tested with a
// fake clock.
package progress

import (
	"slices"
	"sync"
	"time"
)

// Loops is the set of watched loops. The zero value is not usable; a nil
// *Loops is: every method does nothing and Stalled reports none, so code
// that records progress needs no check of its own.
type Loops struct {
	now   func() time.Time
	slack time.Duration

	mu    sync.Mutex
	loops map[string]*loop
}

// loop is one watched loop's state.
type loop struct {
	// bound is the longest one iteration of the loop may legitimately
	// take: its longest wait plus the deadlines of the calls it makes.
	bound time.Duration
	// last is when the loop last made progress (or was watched).
	last time.Time
	// busy is set while the loop runs work that has deadlines of its own
	// and may legitimately take longer than bound (an agent operation
	// pulling images); the loop is not judged until its next Beat.
	busy bool
}

// New returns an empty set. slack is added to every loop's bound: room
// for what no deadline covers (a GC pause, a slow disk, the scheduler of a
// loaded machine). A daemon under systemd passes WatchdogSec.
func New(now func() time.Time, slack time.Duration) *Loops {
	return &Loops{now: now, slack: slack, loops: map[string]*loop{}}
}

// Watch starts judging loop name: from now on it must Beat at least every
// bound (plus the slack). Watching a watched loop sets its bound and
// counts as progress.
func (l *Loops) Watch(name string, bound time.Duration) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loops[name] = &loop{bound: bound, last: l.now()}
}

// Forget stops judging loop name: it ended as it should (its context was
// cancelled, the term it served ended).
func (l *Loops) Forget(name string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.loops, name)
}

// Beat records that loop name made progress now and ends a Busy. A loop
// not watched is ignored.
func (l *Loops) Beat(name string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lp, ok := l.loops[name]; ok {
		lp.last, lp.busy = l.now(), false
	}
}

// Busy records that loop name made progress now and starts work with
// deadlines of its own: the loop is not judged until its next Beat.
func (l *Loops) Busy(name string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if lp, ok := l.loops[name]; ok {
		lp.last, lp.busy = l.now(), true
	}
}

// Stalled returns the watched loops, sorted, that are not busy and made
// no progress for longer than their bound plus the slack; none when every
// loop is making progress.
func (l *Loops) Stalled() []string {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var out []string
	for name, lp := range l.loops {
		if !lp.busy && now.Sub(lp.last) > lp.bound+l.slack {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
