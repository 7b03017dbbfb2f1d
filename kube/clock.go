package kube

import (
	"context"
	"time"
)

// sleep waits d on the injected clock or until ctx ends. It uses a fresh
// timer per wait rather than a ticker: a fake clock then has a waiter only
// while a loop is actually blocked, which lets tests step it in lockstep.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
