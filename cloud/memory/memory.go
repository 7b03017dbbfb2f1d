// Package memory is an in-process cloud.Provider for the unit tests of the
// MIG strategies: instance groups, templates, instances and per-zone
// quotas held in memory, with nothing random and no clock.
//
// Instances are created CREATING and run when the test says so: Advance
// moves every instance that can run to RUNNING; with Options.ListsToRun
// set, ListInstances does it for its group's instances after that many
// calls. Faults are injected per zone (SetQuota, SetStockout) or per call
// (FailNext, TimeoutNext). Every call is recorded (Calls), and request IDs
// are remembered, so a test can assert that a repeated request changed
// nothing.
//
// Deleting is immediate: a deleted instance or group is gone when the call
// returns, never DELETING. A Cloud is safe for concurrent use.
package memory

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/moltproject/molt/cloud"
)

// Options configure a Cloud.
type Options struct {
	// Templates names base templates that exist from the start
	// (TemplateSpec.Base of EnsureTemplate must name one of them).
	Templates []string
	// ListsToRun, when > 0, makes ListInstances run a creating instance
	// of its group (if nothing blocks it) on the ListsToRun-th call that
	// lists it; 0 leaves that to Advance alone.
	ListsToRun int
	// SyncQuota makes a call that needs more instances than the zone's
	// quota allows fail with ErrQuota and create nothing. Without it the
	// instances are created and stay CREATING with a LastError wrapping
	// ErrQuota until quota frees up, as GCE's managed instance groups do.
	SyncQuota bool
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

// Cloud is the in-memory provider; New makes one.
type Cloud struct {
	mu   sync.Mutex
	opts Options
	// templates maps each template to the release it installs ("" for
	// base templates, which install none molt knows).
	templates map[string]string
	groups    map[cloud.GroupRef]*group
	quota     map[string]int  // zone → instance limit (absent: unlimited)
	stockout  map[string]bool // zone → no capacity
	requests  map[string]bool // request IDs carried out
	failNext  int             // calls still to fail with ErrTransient
	timeouts  int             // mutating calls still to "time out" after applying
	calls     []Call
	after     func(context.Context, Call)
}

type group struct {
	ref         cloud.GroupRef
	template    string
	autoscaling cloud.Autoscaling
	seq         int // last number used for a provider-chosen name
	instances   map[string]*instance
}

type instance struct {
	name     string
	template string
	status   cloud.InstanceStatus
	// lastErr is why the instance cannot be created now; nil once it
	// holds quota and capacity.
	lastErr error
	lists   int // ListInstances calls that saw it creating
}

var _ cloud.Provider = (*Cloud)(nil)

// New returns an empty Cloud.
func New(opts Options) *Cloud {
	c := &Cloud{
		opts:      opts,
		templates: map[string]string{},
		groups:    map[cloud.GroupRef]*group{},
		quota:     map[string]int{},
		stockout:  map[string]bool{},
		requests:  map[string]bool{},
	}
	for _, t := range opts.Templates {
		c.templates[t] = ""
	}
	return c
}

// errUnplaced marks an instance not yet checked against quota and
// capacity; it never leaves the package.
var errUnplaced = errors.New("memory: not placed")

var nameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

func validName(kind, name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("memory: %s name %q is not a lower-case DNS label of at most 63 characters: %w", kind, name, cloud.ErrInvalid)
	}
	return nil
}

// Name implements cloud.Provider.
func (c *Cloud) Name() string { return "memory" }

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
		return fmt.Errorf("memory: %s: injected failure: %w", rec.Method, cloud.ErrTransient)
	}
	if !mutating {
		return fn()
	}
	if rec.Req == "" {
		return fmt.Errorf("memory: %s without a req: %w", rec.Method, cloud.ErrInvalid)
	}
	id := cloud.RequestID(rec.Req, rec.Method+" "+rec.Group.String()+" "+rec.Args)
	if c.requests[id] {
		rec.Repeat = true
		return nil
	}
	if err := fn(); err != nil {
		return err
	}
	c.requests[id] = true
	if c.timeouts > 0 {
		c.timeouts--
		return fmt.Errorf("memory: %s: operation still running at its deadline (injected): %w", rec.Method, cloud.ErrTransient)
	}
	return nil
}

func (c *Cloud) group(g cloud.GroupRef) (*group, error) {
	grp, ok := c.groups[g]
	if !ok {
		return nil, fmt.Errorf("memory: group %s: %w", g, cloud.ErrNotFound)
	}
	return grp, nil
}

// EnsureTemplate implements cloud.Provider.
func (c *Cloud) EnsureTemplate(ctx context.Context, spec cloud.TemplateSpec, req string) (string, error) {
	name := cloud.TemplateName(spec)
	err := c.call(ctx, Call{Method: "EnsureTemplate", Args: fmt.Sprintf("release=%s base=%s", spec.Release, spec.Base), Req: req}, true, func() error {
		if spec.Release == "" {
			return fmt.Errorf("memory: template without a release: %w", cloud.ErrInvalid)
		}
		release, ok := c.templates[spec.Base]
		if spec.Base != "" && !ok {
			return fmt.Errorf("memory: base template %q: %w", spec.Base, cloud.ErrNotFound)
		}
		if spec.Base != "" && release == spec.Release {
			name = spec.Base // already the release's template
			return nil
		}
		c.templates[name] = spec.Release
		return nil
	})
	if err != nil {
		return "", err
	}
	return name, nil
}

// GetGroup implements cloud.Provider.
func (c *Cloud) GetGroup(ctx context.Context, g cloud.GroupRef) (cloud.Group, error) {
	var out cloud.Group
	err := c.call(ctx, Call{Method: "GetGroup", Group: g}, false, func() error {
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		out = cloud.Group{GroupRef: g, TargetSize: len(grp.instances), Template: grp.template, Stable: true, Autoscaling: grp.autoscaling}
		for _, in := range grp.instances {
			if in.status != cloud.StatusRunning && in.status != cloud.StatusStopped {
				out.Stable = false
			}
		}
		return nil
	})
	return out, err
}

// CreateGroup implements cloud.Provider. The group's instances are named
// "<group>-0001", "<group>-0002", ….
func (c *Cloud) CreateGroup(ctx context.Context, g cloud.GroupRef, template string, size int, req string) error {
	return c.call(ctx, Call{Method: "CreateGroup", Group: g, Args: fmt.Sprintf("template=%s size=%d", template, size), Req: req}, true, func() error {
		if g.Zone == "" {
			return fmt.Errorf("memory: group %s without a zone: %w", g, cloud.ErrInvalid)
		}
		if err := validName("group", g.Name); err != nil {
			return err
		}
		if size < 0 {
			return fmt.Errorf("memory: group size %d: %w", size, cloud.ErrInvalid)
		}
		if _, ok := c.groups[g]; ok {
			return nil
		}
		if _, ok := c.templates[template]; !ok {
			return fmt.Errorf("memory: template %q: %w", template, cloud.ErrNotFound)
		}
		if err := c.quotaFor(g.Zone, size); err != nil {
			return err
		}
		grp := &group{ref: g, template: template, instances: map[string]*instance{}}
		c.groups[g] = grp
		c.grow(grp, size)
		return nil
	})
}

// DeleteGroup implements cloud.Provider.
func (c *Cloud) DeleteGroup(ctx context.Context, g cloud.GroupRef, req string) error {
	return c.call(ctx, Call{Method: "DeleteGroup", Group: g, Req: req}, true, func() error {
		delete(c.groups, g)
		return nil
	})
}

// SetTemplate implements cloud.Provider.
func (c *Cloud) SetTemplate(ctx context.Context, g cloud.GroupRef, template string, req string) error {
	return c.call(ctx, Call{Method: "SetTemplate", Group: g, Args: "template=" + template, Req: req}, true, func() error {
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		if _, ok := c.templates[template]; !ok {
			return fmt.Errorf("memory: template %q: %w", template, cloud.ErrNotFound)
		}
		grp.template = template
		return nil
	})
}

// Resize implements cloud.Provider. Shrinking removes instances that do
// not run first, then those with the greatest names.
func (c *Cloud) Resize(ctx context.Context, g cloud.GroupRef, size int, req string) error {
	return c.call(ctx, Call{Method: "Resize", Group: g, Args: fmt.Sprintf("size=%d", size), Req: req}, true, func() error {
		if size < 0 {
			return fmt.Errorf("memory: group size %d: %w", size, cloud.ErrInvalid)
		}
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		n := len(grp.instances)
		if size > n {
			if err := c.quotaFor(g.Zone, size-n); err != nil {
				return err
			}
			c.grow(grp, size-n)
			return nil
		}
		victims := sortedInstances(grp)
		sort.SliceStable(victims, func(i, j int) bool {
			ri, rj := victims[i].status == cloud.StatusRunning, victims[j].status == cloud.StatusRunning
			if ri != rj {
				return !ri
			}
			return victims[i].name > victims[j].name
		})
		for _, in := range victims[:n-size] {
			delete(grp.instances, in.name)
		}
		return nil
	})
}

// SetAutoscaling implements cloud.Provider.
func (c *Cloud) SetAutoscaling(ctx context.Context, g cloud.GroupRef, a cloud.Autoscaling, req string) error {
	return c.call(ctx, Call{Method: "SetAutoscaling", Group: g, Args: fmt.Sprintf("min=%d max=%d", a.Min, a.Max), Req: req}, true, func() error {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("memory: %w", err)
		}
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		grp.autoscaling = a
		return nil
	})
}

// ListInstances implements cloud.Provider.
func (c *Cloud) ListInstances(ctx context.Context, g cloud.GroupRef) ([]cloud.Instance, error) {
	var out []cloud.Instance
	err := c.call(ctx, Call{Method: "ListInstances", Group: g}, false, func() error {
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		for _, in := range sortedInstances(grp) {
			if c.opts.ListsToRun > 0 && creating(in) {
				in.lists++
				if in.lists >= c.opts.ListsToRun {
					c.finish(g.Zone, in)
				}
			}
			out = append(out, cloud.Instance{
				Name:       in.name,
				ProviderID: ProviderID(g.Zone, in.name),
				Template:   in.template,
				Status:     in.status,
				LastError:  in.lastErr,
			})
		}
		return nil
	})
	return out, err
}

// ProviderID is the provider ID of the memory instance name in zone.
func ProviderID(zone, name string) string { return "memory://" + zone + "/" + name }

// CreateInstances implements cloud.Provider.
func (c *Cloud) CreateInstances(ctx context.Context, g cloud.GroupRef, names []string, req string) error {
	return c.call(ctx, Call{Method: "CreateInstances", Group: g, Args: fmt.Sprintf("names=%v", names), Req: req}, true, func() error {
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		var fresh []string
		for _, n := range names {
			if err := validName("instance", n); err != nil {
				return err
			}
			if _, ok := grp.instances[n]; !ok && !slices.Contains(fresh, n) {
				fresh = append(fresh, n)
			}
		}
		if err := c.quotaFor(g.Zone, len(fresh)); err != nil {
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
			if err := validName("instance", n); err != nil {
				return err
			}
		}
		if grp, ok := c.groups[g]; ok {
			for _, n := range names {
				delete(grp.instances, n)
			}
		}
		return nil
	})
}

// RecreateInstances implements cloud.Provider.
func (c *Cloud) RecreateInstances(ctx context.Context, g cloud.GroupRef, names []string, req string) error {
	return c.call(ctx, Call{Method: "RecreateInstances", Group: g, Args: fmt.Sprintf("names=%v", names), Req: req}, true, func() error {
		grp, err := c.group(g)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := validName("instance", n); err != nil {
				return err
			}
		}
		for _, n := range names {
			in, ok := grp.instances[n]
			if !ok {
				continue
			}
			in.template = grp.template
			in.status = cloud.StatusRecreating
			in.lists = 0
			in.lastErr = errUnplaced
			c.place(g.Zone, in)
		}
		return nil
	})
}

// Quota implements cloud.Provider: the limit SetQuota gave the zone (0:
// unlimited) and the instances in the zone that hold quota (every one not
// kept from being created by quota or stockout).
func (c *Cloud) Quota(ctx context.Context, zone string) (cloud.Quota, error) {
	var q cloud.Quota
	err := c.call(ctx, Call{Method: "Quota", Group: cloud.GroupRef{Zone: zone}}, false, func() error {
		if zone == "" {
			return fmt.Errorf("memory: quota of no zone: %w", cloud.ErrInvalid)
		}
		q = cloud.Quota{Limit: c.quota[zone], Usage: c.usage(zone)}
		return nil
	})
	return q, err
}

// grow adds n instances with provider-chosen names.
func (c *Cloud) grow(grp *group, n int) {
	for range n {
		var name string
		for {
			grp.seq++
			name = fmt.Sprintf("%s-%04d", grp.ref.Name, grp.seq)
			if _, ok := grp.instances[name]; !ok {
				break
			}
		}
		c.add(grp, name)
	}
}

func (c *Cloud) add(grp *group, name string) {
	in := &instance{name: name, template: grp.template, status: cloud.StatusCreating, lastErr: errUnplaced}
	grp.instances[name] = in
	c.place(grp.ref.Zone, in)
}

// quotaFor refuses n more instances in zone when SyncQuota is set and the
// zone's quota cannot hold them.
func (c *Cloud) quotaFor(zone string, n int) error {
	if !c.opts.SyncQuota || n == 0 {
		return nil
	}
	if limit := c.quota[zone]; limit > 0 && c.usage(zone)+n > limit {
		return fmt.Errorf("memory: zone %s: %d more instances, %d of %d used: %w", zone, n, c.usage(zone), limit, cloud.ErrQuota)
	}
	return nil
}

// place checks an instance that is not placed yet against the zone's
// capacity and quota: it holds them (lastErr nil) or says why not.
func (c *Cloud) place(zone string, in *instance) bool {
	if in.lastErr == nil {
		return true
	}
	switch {
	case c.stockout[zone]:
		in.lastErr = fmt.Errorf("memory: zone %s has no capacity: %w", zone, cloud.ErrStockout)
	case c.quota[zone] > 0 && c.usage(zone) >= c.quota[zone]:
		in.lastErr = fmt.Errorf("memory: zone %s: quota of %d instances used: %w", zone, c.quota[zone], cloud.ErrQuota)
	default:
		in.lastErr = nil
	}
	return in.lastErr == nil
}

// finish runs a creating instance if it can be placed.
func (c *Cloud) finish(zone string, in *instance) {
	if creating(in) && c.place(zone, in) {
		in.status = cloud.StatusRunning
	}
}

func creating(in *instance) bool {
	return in.status == cloud.StatusCreating || in.status == cloud.StatusRecreating
}

// usage counts the instances of zone that hold quota.
func (c *Cloud) usage(zone string) int {
	n := 0
	for ref, grp := range c.groups {
		if ref.Zone != zone {
			continue
		}
		for _, in := range grp.instances {
			if in.lastErr == nil {
				n++
			}
		}
	}
	return n
}

func sortedInstances(grp *group) []*instance {
	out := make([]*instance, 0, len(grp.instances))
	for _, in := range grp.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (c *Cloud) sortedGroups() []*group {
	out := make([]*group, 0, len(c.groups))
	for _, grp := range c.groups {
		out = append(out, grp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ref.String() < out[j].ref.String() })
	return out
}
