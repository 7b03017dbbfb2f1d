package clock

import (
	"sync"
	"time"
)

// Manual is a Clock that moves only when told (Set, Advance): waits and
// AfterFunc calls fire when it reaches their time, in the goroutine that
// moves it. It is safe for concurrent use.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	instant bool
	timers  []*timer
}

type timer struct {
	at   time.Time
	fire func(time.Time)
	done bool
}

// NewManual returns a Manual clock reading now.
func NewManual(now time.Time) *Manual { return &Manual{now: now} }

// NewInstant returns a Manual clock whose waits end at once, moving the
// time on by their duration: a polling loop then runs without waiting,
// and a deadline is reached after exactly deadline/interval polls.
func NewInstant(now time.Time) *Manual { return &Manual{now: now, instant: true} }

// Now returns the clock's time.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d and fires what is due.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	c.moveLocked(c.now.Add(d))
}

// Set moves the clock to t and fires what is due (nothing, if t is
// earlier than the clock's time).
func (c *Manual) Set(t time.Time) {
	c.mu.Lock()
	c.moveLocked(t)
}

// moveLocked sets the time, unlocks and then fires the due timers, so a
// callback may use the clock.
func (c *Manual) moveLocked(t time.Time) {
	c.now = t
	var due []*timer
	keep := c.timers[:0]
	for _, tm := range c.timers {
		switch {
		case tm.done:
		case !tm.at.After(t):
			tm.done = true
			due = append(due, tm)
		default:
			keep = append(keep, tm)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, tm := range due {
		tm.fire(t)
	}
}

// Waiters returns how many waits and AfterFunc calls are pending: a test
// moves the clock once the code under test waits on it.
func (c *Manual) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, tm := range c.timers {
		if !tm.done {
			n++
		}
	}
	return n
}

// After sends the clock's time once it has moved d on (at once for an
// instant clock, which moves itself).
func (c *Manual) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.schedule(d, func(t time.Time) { ch <- t })
	return ch
}

// AfterFunc calls f once the clock has moved d on. For an instant clock f
// runs at once in a goroutine of its own, the caller may hold locks f takes.
func (c *Manual) AfterFunc(d time.Duration, f func()) func() bool {
	if c.isInstant() {
		c.schedule(d, func(time.Time) { go f() })
		return func() bool { return false }
	}
	tm := c.schedule(d, func(time.Time) { f() })
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !tm.done
		tm.done = true
		return was
	}
}

func (c *Manual) isInstant() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.instant
}

func (c *Manual) schedule(d time.Duration, fire func(time.Time)) *timer {
	c.mu.Lock()
	if c.instant {
		c.now = c.now.Add(max(d, 0))
		t := c.now
		c.mu.Unlock()
		tm := &timer{at: t, fire: fire, done: true}
		fire(t)
		return tm
	}
	tm := &timer{at: c.now.Add(d), fire: fire}
	if d <= 0 {
		tm.done = true
		t := c.now
		c.mu.Unlock()
		fire(t)
		return tm
	}
	c.timers = append(c.timers, tm)
	c.mu.Unlock()
	return tm
}
