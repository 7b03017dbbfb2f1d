package memory

import (
	"context"

	"github.com/moltproject/molt/cloud"
)

// Advance is one step of the cloud: every instance that is being created
// or recreated runs, unless the zone's quota or capacity still keeps it
// from being created (then it stays so, with its LastError). Instances are
// taken by name, so which of several waiting instances gets freed quota
// is deterministic. In a driven Cloud the driver runs them: Advance does
// nothing there that the Cloud does not do by itself after every change.
func (c *Cloud) Advance() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.driven() {
		c.changedLogged()
		return
	}
	for _, in := range c.sortedInstances() {
		c.finish(in)
	}
}

// SetQuota limits the instances of zone to limit; 0 puts Options.Quota
// back. Instances already there stay; new ones beyond the limit wait (or
// are refused, with Options.SyncQuota).
func (c *Cloud) SetQuota(zone string, limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if limit <= 0 {
		delete(c.book.Quota, zone)
	} else {
		c.book.Quota[zone] = limit
	}
	c.changedLogged()
}

// SetStockout says whether zone is out of capacity. While it is,
// instances created or recreated there stay CREATING (RECREATING) with a
// LastError wrapping cloud.ErrStockout; when it ends, Advance runs them
// (in a driven Cloud, the driver at once).
func (c *Cloud) SetStockout(zone string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.book.Stockout[zone] = true
	} else {
		delete(c.book.Stockout, zone)
	}
	c.changedLogged()
}

// FailNext makes the next n calls (reads included) fail with an error
// wrapping cloud.ErrTransient, changing nothing.
func (c *Cloud) FailNext(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext += n
}

// TimeoutNext makes the next mutating call that succeeds carry out its
// change and then return an error wrapping cloud.ErrTransient, as a call
// whose operation outlived its deadline does. Its request ID is
// remembered, so the caller's retry with the same req changes nothing
// and returns nil.
func (c *Cloud) TimeoutNext() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timeouts++
}

// Stop makes a running instance STOPPED, as a machine that failed is.
func (c *Cloud) Stop(g cloud.GroupRef, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.group(g); err != nil {
		return err
	}
	in := c.member(g, name)
	if in == nil {
		return c.errorf("instance %s/%s: %w", g, name, cloud.ErrNotFound)
	}
	in.Status = cloud.StatusStopped
	c.changedLogged()
	return nil
}

// AddTemplate makes a template exist (a base template for EnsureTemplate,
// or one a group is created from directly).
func (c *Cloud) AddTemplate(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.book.Templates[name] = ""
	c.changedLogged()
}

// Calls returns the calls made so far, oldest first.
func (c *Cloud) Calls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.calls...)
}

// Repeats counts the recorded calls of method that repeated a request
// already carried out (and so changed nothing).
func (c *Cloud) Repeats(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, call := range c.calls {
		if call.Method == method && call.Repeat {
			n++
		}
	}
	return n
}

// AfterCall sets f to run after every call, outside the Cloud's lock, with
// the caller's context and the call as recorded: a test holds a caller
// right after a change was carried out (say, until it kills the leader
// that made it). If the caller's context ended meanwhile, a call that
// succeeded returns the context's error, its change made. nil removes it.
func (c *Cloud) AfterCall(f func(ctx context.Context, call Call)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.after = f
}
