// Package memory is an in-process cloud.Provider: instance groups,
// templates, instances and per-zone quotas held in memory, with nothing
// random and no clock. It is the one instance-group engine of the project:
// the unit tests of the MIG strategies use it alone, and the lab's instance
// groups (package lab) use it as their book, with a Driver that boots a
// real host behind every instance.
//
// Without a Driver, instances are created CREATING and run when the test
// says so: Advance moves every instance that can run to RUNNING; with
// Options.ListsToRun set, ListInstances does it for its group's instances
// after that many calls. Deleting is immediate: a deleted instance or
// group is gone when the call returns, never DELETING.
//
// With a Driver (driven.go), the driver makes the machines: the Cloud tells
// it which instances want a machine or want theirs removed, and the driver
// reports back when a machine runs, failed, or is gone. Instances are then
// DELETING until the driver removed their machine, and their names name
// machines: unique in the whole Cloud.
//
// Faults are injected per zone (SetQuota, SetStockout) or per call
// (FailNext, TimeoutNext). Every call is recorded (Calls), and request IDs
// are remembered, so a test can assert that a repeated request changed
// nothing. With Options.File the book — templates, groups, instances,
// request IDs, quota and stockout — is kept in a file too, and Open picks
// it up again. A Cloud is safe for concurrent use.
package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/moltproject/molt/cloud"
)

// Options configure a Cloud.
type Options struct {
	// Name is the provider's name (Name) and starts its errors (default
	// "memory").
	Name string
	// Templates names base templates that exist from the start
	// (TemplateSpec.Base of EnsureTemplate must name one of them).
	Templates []string
	// ListsToRun, when > 0, makes ListInstances run a creating instance
	// of its group (if nothing blocks it) on the ListsToRun-th call that
	// lists it; 0 leaves that to Advance alone. A driven Cloud ignores it.
	ListsToRun int
	// SyncQuota makes a call that needs more instances than the zone's
	// quota allows fail with ErrQuota and create nothing. Without it the
	// instances are created and stay CREATING with a LastError wrapping
	// ErrQuota until quota frees up, as GCE's managed instance groups do.
	SyncQuota bool
	// Quota is the instances each zone's quota allows when SetQuota did
	// not set the zone's (0: unlimited).
	Quota int
	// Machines, when > 0, is how many instances the Cloud holds in all
	// zones together (the lab: its instance addresses). Each instance
	// holds one, numbered from 0 (Machine.Slot), the lowest free, for its
	// whole life; a call that needs more fails with ErrQuota, naming
	// MachinesAre, and creates nothing.
	Machines    int
	MachinesAre string
	// Reserved are names no instance may take, each with what holds it
	// (ErrConflict).
	Reserved map[string]string
	// ProviderID makes an instance's provider ID (default: ProviderID of
	// its zone and name).
	ProviderID func(g cloud.GroupRef, name string) string
	// Driver, when set, makes and removes the instances' machines (see
	// driven.go).
	Driver Driver
	// File, for Open, is where the book is kept.
	File string
	// Log gets what no caller can be told (a failed save after a change
	// the driver reported); default: discarded.
	Log *slog.Logger
}

// Call is one recorded call of a Provider method.
type Call struct {
	// Method is the Provider method's name ("CreateInstances").
	Method string
	// Group is the group the call named (zero for EnsureTemplate and
	// Quota, which record the zone in Group.Zone).
	Group cloud.GroupRef
	// Args describes the other arguments ("names=[a b]", "size=3").
	Args string
	// Req is the req the caller passed ("" for reads).
	Req string
	// Repeat is true when the request had been carried out before under
	// the same request ID, so this call changed nothing.
	Repeat bool
	// Err is what the call returned.
	Err error
}

// Cloud is the in-memory provider; New or Open makes one.
type Cloud struct {
	mu   sync.Mutex
	opts Options
	book book
	// changed is broadcast after every change of the book (driven.go
	// waits on it).
	changed  *sync.Cond
	closed   bool
	failNext int // calls still to fail with ErrTransient
	timeouts int // mutating calls still to "time out" after applying
	calls    []Call
	after    func(context.Context, Call)
}

// book is what a Cloud keeps, as the File holds it.
type book struct {
	// Templates maps each template to the release it installs ("" for
	// base templates, which install none molt knows).
	Templates map[string]string `json:"templates"`
	// Groups are by GroupRef.String().
	Groups map[string]*group `json:"groups"`
	// Instances are by key: the name in a driven Cloud, else
	// "<zone>/<group>/<name>".
	Instances map[string]*instance `json:"instances"`
	// Requests are the request IDs carried out.
	Requests map[string]bool `json:"requests"`
	// Quota and Stockout are per zone (absent: Options.Quota, capacity).
	Quota    map[string]int  `json:"quota,omitempty"`
	Stockout map[string]bool `json:"stockout,omitempty"`
}

type group struct {
	Ref         cloud.GroupRef    `json:"ref"`
	Template    string            `json:"template"`
	Autoscaling cloud.Autoscaling `json:"autoscaling"`
	// Seq is the last number used for a provider-chosen name.
	Seq int `json:"seq"`
}

// Why an instance is not placed: it does not hold quota and capacity yet.
const (
	waitUnplaced = "unplaced" // not checked yet; never seen outside
	waitQuota    = "quota"
	waitStockout = "stockout"
)

type instance struct {
	Name     string               `json:"name"`
	Group    cloud.GroupRef       `json:"group"`
	Template string               `json:"template"`
	Status   cloud.InstanceStatus `json:"status"`
	// Waiting is why the instance cannot be created now; "" once it
	// holds quota and capacity.
	Waiting string `json:"waiting,omitempty"`
	// Error is why a driven instance's machine stopped.
	Error string `json:"error,omitempty"`
	// Slot is its machine's number (Options.Machines).
	Slot int `json:"slot"`
	// Gen counts the machines the instance was asked for (a recreate
	// asks for a new one).
	Gen int `json:"gen"`
	// Gone: the instance is being deleted with its group, which no
	// longer exists.
	Gone  bool `json:"gone,omitempty"`
	lists int  // ListInstances calls that saw it creating
}

var _ cloud.Provider = (*Cloud)(nil)

// New returns an empty Cloud (Options.File is not read: see Open).
func New(opts Options) *Cloud {
	if opts.Name == "" {
		opts.Name = "memory"
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &Cloud{opts: opts, book: book{Templates: map[string]string{}, Groups: map[string]*group{},
		Instances: map[string]*instance{}, Requests: map[string]bool{}, Quota: map[string]int{}, Stockout: map[string]bool{}}}
	c.changed = sync.NewCond(&c.mu)
	for _, t := range opts.Templates {
		c.book.Templates[t] = ""
	}
	return c
}

var nameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

func (c *Cloud) validName(kind, name string) error {
	if !nameRE.MatchString(name) {
		return c.errorf("%s name %q is not a lower-case DNS label of at most 63 characters: %w", kind, name, cloud.ErrInvalid)
	}
	return nil
}

// errorf is fmt.Errorf with the provider's name in front.
func (c *Cloud) errorf(format string, a ...any) error {
	return fmt.Errorf(c.opts.Name+": "+format, a...)
}

// Name implements cloud.Provider.
func (c *Cloud) Name() string { return c.opts.Name }

func (c *Cloud) driven() bool { return c.opts.Driver != nil }

// call runs fn under the lock and records it. A mutating call is
// deduplicated by its request ID (req, method, group and arguments) and
// may be failed or timed out by the hooks.
func (c *Cloud) call(ctx context.Context, rec Call, mutating bool, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	err := c.run(&rec, mutating, fn)
	rec.Err = err
	c.calls = append(c.calls, rec)
	after := c.after
	c.mu.Unlock()
	if after != nil {
		after(ctx, rec)
		if err == nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return err
}

func (c *Cloud) run(rec *Call, mutating bool, fn func() error) error {
	if c.failNext > 0 {
		c.failNext--
		return c.errorf("%s: injected failure: %w", rec.Method, cloud.ErrTransient)
	}
	if !mutating {
		return fn()
	}
	if rec.Req == "" {
		return c.errorf("%s without a req: %w", rec.Method, cloud.ErrInvalid)
	}
	id := cloud.RequestID(rec.Req, rec.Method+" "+rec.Group.String()+" "+rec.Args)
	if c.book.Requests[id] {
		rec.Repeat = true
		return nil
	}
	if err := fn(); err != nil {
		return err
	}
	c.book.Requests[id] = true
	if err := c.changedLocked(); err != nil {
		return c.errorf("%s: %v: %w", rec.Method, err, cloud.ErrTransient)
	}
	if c.timeouts > 0 {
		c.timeouts--
		return c.errorf("%s: operation still running at its deadline (injected): %w", rec.Method, cloud.ErrTransient)
	}
	return nil
}

func (c *Cloud) group(g cloud.GroupRef) (*group, error) {
	grp, ok := c.book.Groups[g.String()]
	if !ok {
		return nil, c.errorf("group %s: %w", g, cloud.ErrNotFound)
	}
	return grp, nil
}

// EnsureTemplate implements cloud.Provider. A driven Cloud asks its
// Driver first whether it can make machines at the release.
func (c *Cloud) EnsureTemplate(ctx context.Context, spec cloud.TemplateSpec, req string) (string, error) {
	if c.driven() && spec.Release != "" {
		// Outside the lock: the driver may prepare the release first.
		if err := c.opts.Driver.CheckRelease(ctx, spec.Release); err != nil {
			return "", err
		}
	}
	err := c.call(ctx, Call{Method: "EnsureTemplate", Args: fmt.Sprintf("release=%s base=%s", spec.Release, spec.Base), Req: req}, true, func() error {
		if spec.Release == "" {
			return c.errorf("template without a release: %w", cloud.ErrInvalid)
		}
		release, ok := c.book.Templates[spec.Base]
		if spec.Base != "" && !ok {
			return c.errorf("base template %q: %w", spec.Base, cloud.ErrNotFound)
		}
		if spec.Base == "" || release != spec.Release {
			c.book.Templates[cloud.TemplateName(spec)] = spec.Release
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	// A base that installs the release already is the release's
	// template; a repeated request reports what the first one made.
	c.mu.Lock()
	defer c.mu.Unlock()
	if release, ok := c.book.Templates[spec.Base]; spec.Base != "" && ok && release == spec.Release {
		return spec.Base, nil
	}
	return cloud.TemplateName(spec), nil
}

// GetGroup implements cloud.Provider. Instances being deleted are not in
// the target size, and keep the group from being stable.
func (c *Cloud) GetGroup(ctx context.Context, g cloud.GroupRef) (cloud.Group, error) {
	var out cloud.Group
	err := c.call(ctx, Call{Method: "GetGroup", Group: g}, false, func() error {
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		out = cloud.Group{GroupRef: g, Template: grp.Template, Stable: true, Autoscaling: grp.Autoscaling}
		for _, in := range c.members(g) {
			if in.Status != cloud.StatusDeleting {
				out.TargetSize++
			}
			if in.Status != cloud.StatusRunning && in.Status != cloud.StatusStopped {
				out.Stable = false
			}
		}
		return nil
	})
	return out, err
}

// CreateGroup implements cloud.Provider. The group's instances are named
// "<group>-0001", "<group>-0002", …; in a driven Cloud "<group>-1",
// "<group>-2", …, a name already taken in the Cloud skipped.
func (c *Cloud) CreateGroup(ctx context.Context, g cloud.GroupRef, template string, size int, req string) error {
	return c.call(ctx, Call{Method: "CreateGroup", Group: g, Args: fmt.Sprintf("template=%s size=%d", template, size), Req: req}, true, func() error {
		if err := c.validName("zone", g.Zone); err != nil {
			return err
		}
		if err := c.validName("group", g.Name); err != nil {
			return err
		}
		if size < 0 {
			return c.errorf("group size %d: %w", size, cloud.ErrInvalid)
		}
		if _, ok := c.book.Groups[g.String()]; ok {
			return nil
		}
		if _, ok := c.book.Templates[template]; !ok {
			return c.errorf("template %q: %w", template, cloud.ErrNotFound)
		}
		grp := &group{Ref: g, Template: template}
		names, seq, err := c.chooseNames(grp, size)
		if err != nil {
			return err
		}
		if err := c.room(g.Zone, size); err != nil {
			return err
		}
		grp.Seq = seq
		c.book.Groups[g.String()] = grp
		for _, n := range names {
			c.add(grp, n)
		}
		return nil
	})
}

// DeleteGroup implements cloud.Provider. The group is gone when the call
// returns; a driven Cloud's call returns once the driver removed its
// instances' machines too.
func (c *Cloud) DeleteGroup(ctx context.Context, g cloud.GroupRef, req string) error {
	err := c.call(ctx, Call{Method: "DeleteGroup", Group: g, Req: req}, true, func() error {
		if _, ok := c.book.Groups[g.String()]; !ok {
			return nil
		}
		for _, in := range c.members(g) {
			in.Gone = true
			c.remove(in)
		}
		delete(c.book.Groups, g.String())
		return nil
	})
	if !c.driven() || (err != nil && !errors.Is(err, cloud.ErrTransient)) {
		return err
	}
	if werr := c.waitGone(ctx, g); werr != nil {
		return werr
	}
	return err
}

// SetTemplate implements cloud.Provider.
func (c *Cloud) SetTemplate(ctx context.Context, g cloud.GroupRef, template string, req string) error {
	return c.call(ctx, Call{Method: "SetTemplate", Group: g, Args: "template=" + template, Req: req}, true, func() error {
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		if _, ok := c.book.Templates[template]; !ok {
			return c.errorf("template %q: %w", template, cloud.ErrNotFound)
		}
		grp.Template = template
		return nil
	})
}

// Resize implements cloud.Provider. Shrinking removes instances that do
// not run first, then those with the greatest names.
func (c *Cloud) Resize(ctx context.Context, g cloud.GroupRef, size int, req string) error {
	return c.call(ctx, Call{Method: "Resize", Group: g, Args: fmt.Sprintf("size=%d", size), Req: req}, true, func() error {
		if size < 0 {
			return c.errorf("group size %d: %w", size, cloud.ErrInvalid)
		}
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		var live []*instance
		for _, in := range c.members(g) {
			if in.Status != cloud.StatusDeleting {
				live = append(live, in)
			}
		}
		n := len(live)
		if size > n {
			names, seq, err := c.chooseNames(grp, size-n)
			if err != nil {
				return err
			}
			if err := c.room(g.Zone, size-n); err != nil {
				return err
			}
			grp.Seq = seq
			for _, name := range names {
				c.add(grp, name)
			}
			return nil
		}
		sort.SliceStable(live, func(i, j int) bool {
			ri, rj := live[i].Status == cloud.StatusRunning, live[j].Status == cloud.StatusRunning
			if ri != rj {
				return !ri
			}
			return live[i].Name > live[j].Name
		})
		for _, in := range live[:n-size] {
			c.remove(in)
		}
		return nil
	})
}

// SetAutoscaling implements cloud.Provider. Nothing autoscales: the
// limits are kept for GetGroup, as a group's autoscaler would hold them.
func (c *Cloud) SetAutoscaling(ctx context.Context, g cloud.GroupRef, a cloud.Autoscaling, req string) error {
	return c.call(ctx, Call{Method: "SetAutoscaling", Group: g, Args: fmt.Sprintf("min=%d max=%d", a.Min, a.Max), Req: req}, true, func() error {
		if err := a.Validate(); err != nil {
			return c.errorf("%w", err)
		}
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		grp.Autoscaling = a
		return nil
	})
}

// ListInstances implements cloud.Provider.
func (c *Cloud) ListInstances(ctx context.Context, g cloud.GroupRef) ([]cloud.Instance, error) {
	var out []cloud.Instance
	err := c.call(ctx, Call{Method: "ListInstances", Group: g}, false, func() error {
		if _, err := c.group(g); err != nil {
			return err
		}
		for _, in := range c.members(g) {
			if c.opts.ListsToRun > 0 && !c.driven() && creating(in) {
				in.lists++
				if in.lists >= c.opts.ListsToRun {
					c.finish(in)
				}
			}
			out = append(out, c.instanceOf(in))
		}
		return nil
	})
	return out, err
}

// ProviderID is the provider ID of the memory instance name in zone.
func ProviderID(zone, name string) string { return "memory://" + zone + "/" + name }

// CreateInstances implements cloud.Provider. In a driven Cloud a name
// another group holds, or a reserved one, is ErrConflict (names name
// machines), and one still being deleted ErrTransient.
func (c *Cloud) CreateInstances(ctx context.Context, g cloud.GroupRef, names []string, req string) error {
	return c.call(ctx, Call{Method: "CreateInstances", Group: g, Args: fmt.Sprintf("names=%v", names), Req: req}, true, func() error {
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		var fresh []string
		for _, n := range names {
			if err := c.validName("instance", n); err != nil {
				return err
			}
			in, ok := c.book.Instances[c.key(g, n)]
			switch {
			case c.opts.Reserved[n] != "":
				return c.errorf("instance name %q is %s: %w", n, c.opts.Reserved[n], cloud.ErrConflict)
			case ok && in.Status == cloud.StatusDeleting:
				return c.errorf("instance %q is still being deleted: %w", n, cloud.ErrTransient)
			case ok && (in.Group != g || in.Gone):
				return c.errorf("instance name %q is taken by group %s: %w", n, in.Group, cloud.ErrConflict)
			case !ok && !slices.Contains(fresh, n):
				fresh = append(fresh, n)
			}
		}
		if err := c.room(g.Zone, len(fresh)); err != nil {
			return err
		}
		for _, n := range fresh {
			c.add(grp, n)
		}
		return nil
	})
}

// DeleteInstances implements cloud.Provider.
func (c *Cloud) DeleteInstances(ctx context.Context, g cloud.GroupRef, names []string, req string) error {
	return c.call(ctx, Call{Method: "DeleteInstances", Group: g, Args: fmt.Sprintf("names=%v", names), Req: req}, true, func() error {
		for _, n := range names {
			if err := c.validName("instance", n); err != nil {
				return err
			}
		}
		for _, n := range names {
			if in := c.member(g, n); in != nil {
				c.remove(in)
			}
		}
		return nil
	})
}

// RecreateInstances implements cloud.Provider: a new machine under the
// same name and provider ID, from the group's template.
func (c *Cloud) RecreateInstances(ctx context.Context, g cloud.GroupRef, names []string, req string) error {
	return c.call(ctx, Call{Method: "RecreateInstances", Group: g, Args: fmt.Sprintf("names=%v", names), Req: req}, true, func() error {
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := c.validName("instance", n); err != nil {
				return err
			}
		}
		for _, n := range names {
			in := c.member(g, n)
			if in == nil || in.Status == cloud.StatusDeleting {
				continue
			}
			in.Template, in.Status, in.Error, in.Waiting, in.lists = grp.Template, cloud.StatusRecreating, "", waitUnplaced, 0
			in.Gen++
			c.place(in)
			c.wake(in)
		}
		return nil
	})
}

// Quota implements cloud.Provider: the zone's limit (0: unlimited) and
// the instances in the zone that hold quota (every one not being deleted
// and not kept from being created by quota or stockout).
func (c *Cloud) Quota(ctx context.Context, zone string) (cloud.Quota, error) {
	var q cloud.Quota
	err := c.call(ctx, Call{Method: "Quota", Group: cloud.GroupRef{Zone: zone}}, false, func() error {
		if zone == "" {
			return c.errorf("quota of no zone: %w", cloud.ErrInvalid)
		}
		q = cloud.Quota{Limit: c.limit(zone), Usage: c.usage(zone)}
		return nil
	})
	return q, err
}

// Instances lists every instance of the Cloud (those of deleted groups
// still being deleted included), sorted by name.
func (c *Cloud) Instances() []cloud.Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []cloud.Instance
	for _, in := range c.sortedInstances() {
		out = append(out, c.instanceOf(in))
	}
	return out
}
