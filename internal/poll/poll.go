// Package poll is molt's one loop that calls a function until it reports
// done: the lab waits for its hosts, nodes and add-ons with it, the e2e
// suite for the coordinator's answers, the raftflood script for its
// cluster. Tests use testify's require.Eventually instead.
package poll

import (
	"context"
	"fmt"
	"time"
)

// Func reports whether the condition holds; while it does not, why says
// what is still missing. An error ends the poll at once.
type Func func(ctx context.Context) (done bool, why string, err error)

// TimeoutError is Until's error when the condition did not hold in time
// (or ctx ended first); it carries the last reason f gave.
type TimeoutError struct {
	// After is the timeout Until was given.
	After time.Duration
	// Last is f's last "not yet" reason; "" when it gave none.
	Last string
	// Err is the context's error.
	Err error
}

func (e *TimeoutError) Error() string {
	last := e.Last
	if last == "" {
		last = "condition not met"
	}
	return fmt.Sprintf("after %s: %s", e.After, last)
}

// Unwrap returns the context's error (context.DeadlineExceeded, or
// context.Canceled when the caller gave up).
func (e *TimeoutError) Unwrap() error { return e.Err }

// Until calls f, then again every interval, until it reports done (nil),
// returns an error (that error), or timeout passes or ctx ends (a
// *TimeoutError). f's context ends with the timeout.
func Until(ctx context.Context, timeout, interval time.Duration, f Func) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		done, why, err := f(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		// ctx is read before the wait: a select picks at random when the
		// timer has fired too.
		if ctx.Err() != nil {
			return &TimeoutError{After: timeout, Last: why, Err: ctx.Err()}
		}
		t.Reset(interval)
		select {
		case <-ctx.Done():
			return &TimeoutError{After: timeout, Last: why, Err: ctx.Err()}
		case <-t.C:
		}
	}
}
