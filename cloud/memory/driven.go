package memory

import (
	"context"
	"fmt"

	"github.com/moltproject/molt/cloud"
)

// A driven Cloud keeps the book and leaves the machines to a Driver: it
// wakes the driver for an instance whose machine should change, the
// driver reads what is wanted (Machine), does it, and reports (Running,
// Failed, Removed). The book stays the Cloud's: statuses, placement,
// quota, request IDs. The lab's instance groups are such a driver, whose
// machines are systemd-nspawn hosts.

// Driver makes and removes the machines behind a driven Cloud's instances.
type Driver interface {
	// CheckRelease says whether the driver can make machines at release
	// (an error wrapping cloud.ErrInvalid when not): EnsureTemplate asks
	// it, outside the Cloud's lock, before it makes a template.
	CheckRelease(ctx context.Context, release string) error
	// Wake says the instance named may want something of its machine
	// now: the driver looks at Machine(name) again. It is called with the
	// Cloud's lock held: it must not call the Cloud before it returns
	// (start a worker, signal one).
	Wake(name string)
}

// Want is what a driven Cloud wants of an instance's machine.
type Want int

const (
	// WantNothing: the instance runs, is stopped, or waits for quota or
	// capacity.
	WantNothing Want = iota
	// WantRunning: a machine of Machine.Gen (a recreate asks for a new
	// one: the old one goes first), then Running or Failed.
	WantRunning
	// WantGone: no machine, then Removed.
	WantGone
)

// Machine is what a driven Cloud says of one instance's machine.
type Machine struct {
	Name  string
	Group cloud.GroupRef
	// Release is what the instance's template installs.
	Release string
	// Slot is the machine's number (Options.Machines), the instance's for
	// its whole life.
	Slot int
	// Gen counts the machines the instance was asked for.
	Gen    int
	Status cloud.InstanceStatus
	Want   Want
}

// Machine is what the Cloud wants of instance name's machine; false when
// no instance has the name (any more).
func (c *Cloud) Machine(name string) (Machine, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in, ok := c.book.Instances[name]
	if !ok {
		return Machine{}, false
	}
	return c.machineOf(in), true
}

// Machines lists what the Cloud says of every instance's machine, sorted
// by name.
func (c *Cloud) Machines() []Machine {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Machine
	for _, in := range c.sortedInstances() {
		out = append(out, c.machineOf(in))
	}
	return out
}

func (c *Cloud) machineOf(in *instance) Machine {
	m := Machine{Name: in.Name, Group: in.Group, Release: c.book.Templates[in.Template], Slot: in.Slot, Gen: in.Gen, Status: in.Status}
	switch {
	case in.Status == cloud.StatusDeleting:
		m.Want = WantGone
	case creating(in) && in.Waiting == "":
		m.Want = WantRunning
	}
	return m
}

// Running reports that instance name's machine of gen runs: a creating
// instance of that gen is RUNNING.
func (c *Cloud) Running(name string, gen int) {
	c.report(name, gen, func(in *instance) {
		if creating(in) {
			in.Status, in.Error = cloud.StatusRunning, ""
		}
	})
}

// Failed reports that instance name's machine of gen did not come up, or
// was lost: a creating or running instance of that gen is STOPPED with err
// as its LastError (not retryable: the caller recreates or deletes it).
func (c *Cloud) Failed(name string, gen int, err error) {
	c.report(name, gen, func(in *instance) {
		if creating(in) || in.Status == cloud.StatusRunning {
			in.Status, in.Error = cloud.StatusStopped, err.Error()
		}
	})
}

// Removed reports that instance name's machine is gone: an instance being
// deleted is deleted.
func (c *Cloud) Removed(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in, ok := c.book.Instances[name]; ok && in.Status == cloud.StatusDeleting {
		delete(c.book.Instances, name)
		c.changedLogged()
	}
}

func (c *Cloud) report(name string, gen int, fn func(*instance)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in, ok := c.book.Instances[name]; ok && in.Gen == gen {
		fn(in)
		c.changedLogged()
	}
}

// wake tells the driver about in.
func (c *Cloud) wake(in *instance) {
	if c.driven() {
		c.opts.Driver.Wake(in.Name)
	}
}

// Settle returns once no instance is being created, recreated or deleted,
// but for those that wait for quota or capacity: in a driven Cloud, once
// the driver caught up with the book.
func (c *Cloud) Settle(ctx context.Context) error {
	return c.await(ctx, func() string {
		for _, in := range c.sortedInstances() {
			if in.Status == cloud.StatusDeleting || (creating(in) && in.Waiting == "") {
				return fmt.Sprintf("instance %s %s", in.Name, in.Status)
			}
		}
		return ""
	})
}

// waitGone waits until no instance of g remains (a driven DeleteGroup).
func (c *Cloud) waitGone(ctx context.Context, g cloud.GroupRef) error {
	return c.await(ctx, func() string {
		for _, in := range c.sortedInstances() {
			if in.Group == g {
				return fmt.Sprintf("instance %s is still being deleted", in.Name)
			}
		}
		return ""
	})
}

// await waits under the lock until left says nothing is left, ctx ends
// or the Cloud closes; the error then names what was left and wraps
// cloud.ErrTransient.
func (c *Cloud) await(ctx context.Context, left func() string) error {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		what := left()
		if what == "" {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return c.errorf("%s: %v: %w", what, err, cloud.ErrTransient)
		}
		if c.closed {
			return c.errorf("%s: closed: %w", what, cloud.ErrTransient)
		}
		c.changed.Wait()
	}
}

// Close ends the waits of Settle and a driven DeleteGroup; the Cloud
// still answers calls.
func (c *Cloud) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.changed.Broadcast()
}
