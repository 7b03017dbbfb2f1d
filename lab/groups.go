package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/moltproject/molt/cloud"
)

// The lab's instance groups (SPEC §7): a cloud.Provider whose instances are
// lab hosts. A template is a release version; creating an instance boots a
// new systemd-nspawn host from the shared rootfs at that release (kubelet,
// containerd, images, and whatever GroupsConfig.AfterInstance installs —
// the agent), which joins the cluster as a Node named after the instance,
// with provider ID molt-lab://<zone>/<group>/<instance> and the label
// topology.kubernetes.io/zone. Deleting an instance stops its host, removes
// its network and its Node. Zones are labels; the lab has one machine.
//
// Groups keeps the book — groups, templates, instances, the request IDs it
// carried out, quota and stockout per zone — in memory and in
// <state>/groups.json, and hands the hosts to its machines: the real ones
// (instances.go), or a fake for the unit tests of the book itself. Calls
// return once the book changed; hosts boot and stop in the background, one
// worker per instance, and ListInstances shows where each is.

// ProviderIDScheme starts every lab instance's provider ID.
const ProviderIDScheme = "molt-lab://"

// InstanceProviderID is the provider ID of instance name of group in zone.
func InstanceProviderID(zone, group, name string) string {
	return ProviderIDScheme + zone + "/" + group + "/" + name
}

// ZoneLabel is the Node label that names an instance's zone.
const ZoneLabel = "topology.kubernetes.io/zone"

// Instance addresses: lab hosts of the topology use 10.77.0.2-99; the
// groups' instances get 10.77.0.100-250 (and pod CIDRs 10.244.100-250.0/24).
const (
	firstInstanceOctet = 100
	lastInstanceOctet  = 250
)

// retryPause is how long a worker waits before it tries a failed step of
// an instance again (removing a host, after an error).
var retryPause = 2 * time.Second

func afterRetry() <-chan time.Time { return time.After(retryPause) }

// bootAttempts is how often a worker tries to boot an instance's host
// before the instance is STOPPED with the last error.
const bootAttempts = 3

// GroupsConfig configures the lab's instance groups.
type GroupsConfig struct {
	// Quota is the number of instances each zone's quota allows (0:
	// unlimited); SetQuota changes one zone's. A call that needs more is
	// refused with cloud.ErrQuota and creates nothing.
	Quota int
	// AfterInstance runs on every instance's host once the lab prepared
	// it (kubelet started), before the instance is RUNNING: the hook that
	// installs molt-agent, as Config.AfterHost does for the topology.
	AfterInstance func(ctx context.Context, h *Host, spec HostSpec) error
	// Parallel bounds the hosts booting at once (default: the lab's
	// Parallel).
	Parallel int
	// Listen is where ServeGroups listens in the lab's namespace: a
	// loopback address (default 127.0.0.1:0, a free port). Serving again
	// after a restart on the address a cluster's cloud spec names keeps
	// that spec working.
	Listen string
}

// machine is what the machines need to know of an instance's host.
type machine struct {
	Name, Zone, Group, IP, Release string
}

func (m machine) providerID() string { return InstanceProviderID(m.Zone, m.Group, m.Name) }

// machines boots and removes the hosts behind instances.
type machines interface {
	// checkRelease says whether the lab can boot hosts at release (an
	// error wrapping cloud.ErrInvalid when not).
	checkRelease(ctx context.Context, release string) error
	// start boots m's host and returns once it runs as a node of the
	// cluster would (kubelet started, AfterInstance done). On error it
	// leaves nothing of the host behind.
	start(ctx context.Context, m machine) error
	// stop removes m's host and its network; its Node too unless
	// keepNode (a recreate keeps the Node, as a cloud does).
	stop(ctx context.Context, m machine, keepNode bool) error
	// running reports whether m's host runs (after a restart of the
	// process that keeps the book).
	running(m machine) bool
}

// groupsBook is the book as it is saved.
type groupsBook struct {
	// Templates maps each template to its release.
	Templates map[string]string     `json:"templates"`
	Groups    map[string]*bookGroup `json:"groups"`
	// Instances are every instance of the lab, by name (names are
	// hostnames and Node names: unique in the lab, not only per zone).
	Instances map[string]*bookInstance `json:"instances"`
	// Requests are the request IDs carried out.
	Requests map[string]bool `json:"requests"`
	// Quota and Stockout are per zone (absent: the default quota, capacity).
	Quota    map[string]int  `json:"quota,omitempty"`
	Stockout map[string]bool `json:"stockout,omitempty"`
}

type bookGroup struct {
	Zone        string            `json:"zone"`
	Name        string            `json:"name"`
	Template    string            `json:"template"`
	Autoscaling cloud.Autoscaling `json:"autoscaling"`
	// Seq is the last number used for a name the lab chose.
	Seq int `json:"seq"`
}

type bookInstance struct {
	Name     string               `json:"name"`
	Zone     string               `json:"zone"`
	Group    string               `json:"group"`
	IP       string               `json:"ip"`
	Template string               `json:"template"`
	Status   cloud.InstanceStatus `json:"status"`
	// Waiting is why the instance cannot be created now ("quota",
	// "stockout"); Error the last boot failure of a STOPPED instance.
	Waiting string `json:"waiting,omitempty"`
	Error   string `json:"error,omitempty"`
	// Gen counts the hosts the instance was asked to have (a recreate
	// asks for a new one); HostGen is the one its host runs.
	Gen     int `json:"gen"`
	HostGen int `json:"hostGen"`
	// Gone: the instance is being deleted with its group, which no longer
	// exists.
	Gone bool `json:"gone,omitempty"`
}

func groupKey(g cloud.GroupRef) string { return g.Zone + "/" + g.Name }

// Groups is the lab's instance groups; Lab.Groups or NewGroups makes one.
type Groups struct {
	cfg  GroupsConfig
	m    machines
	path string // the book's file; "" keeps it in memory only
	log  *slog.Logger
	// reserved are names an instance may not take (the topology's hosts).
	reserved map[string]bool

	mu       sync.Mutex
	changed  *sync.Cond
	book     groupsBook
	working  map[string]bool // instances with a worker
	hostUp   map[string]bool // instances whose host runs
	timeouts int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{}
}

var _ cloud.Provider = (*Groups)(nil)

// newGroups opens the book at path (created when missing) over m.
func newGroups(cfg GroupsConfig, m machines, path string, reserved []string, log *slog.Logger) (*Groups, error) {
	if cfg.Parallel < 1 {
		cfg.Parallel = 2
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Groups{cfg: cfg, m: m, path: path, log: log, reserved: map[string]bool{},
		working: map[string]bool{}, hostUp: map[string]bool{}, sem: make(chan struct{}, cfg.Parallel)}
	g.changed = sync.NewCond(&g.mu)
	for _, n := range reserved {
		g.reserved[n] = true
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.book = groupsBook{Templates: map[string]string{}, Groups: map[string]*bookGroup{}, Instances: map[string]*bookInstance{},
		Requests: map[string]bool{}, Quota: map[string]int{}, Stockout: map[string]bool{}}
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			if err := json.Unmarshal(b, &g.book); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrHost, path, err)
			}
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("%w: %v", ErrHost, err)
		}
	}
	if g.book.Templates == nil {
		g.book.Templates = map[string]string{}
	}
	if g.book.Groups == nil {
		g.book.Groups = map[string]*bookGroup{}
	}
	if g.book.Instances == nil {
		g.book.Instances = map[string]*bookInstance{}
	}
	if g.book.Requests == nil {
		g.book.Requests = map[string]bool{}
	}
	if g.book.Quota == nil {
		g.book.Quota = map[string]int{}
	}
	if g.book.Stockout == nil {
		g.book.Stockout = map[string]bool{}
	}
	// Pick up where the last keeper of the book stopped: hosts that run
	// are kept; an instance whose host was lost while it ran is STOPPED;
	// every unfinished change gets its worker again.
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, in := range g.book.Instances {
		g.hostUp[in.Name] = m.running(g.machineOf(in))
		if in.Status == cloud.StatusRunning && !g.hostUp[in.Name] {
			in.Status, in.Error = cloud.StatusStopped, "the host was not running when the lab's instance groups started"
		}
		g.kick(in)
	}
	return g, g.saveLocked()
}

// Close stops the workers (a host being booted is left to the next keeper
// of the book, which boots it again) and waits for them.
func (g *Groups) Close() {
	g.cancel()
	g.mu.Lock()
	g.changed.Broadcast()
	g.mu.Unlock()
	g.wg.Wait()
}

// Name implements cloud.Provider.
func (g *Groups) Name() string { return "lab" }

// SetQuota sets the instances zone's quota allows (0: back to the
// configured default). Instances already there stay.
func (g *Groups) SetQuota(zone string, limit int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if limit <= 0 {
		delete(g.book.Quota, zone)
	} else {
		g.book.Quota[zone] = limit
	}
	g.saveLogged()
}

// SetStockout says whether zone is out of capacity: while it is, instances
// created or recreated there wait, CREATING (RECREATING) with a LastError
// wrapping cloud.ErrStockout, and boot once it ends.
func (g *Groups) SetStockout(zone string, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if on {
		g.book.Stockout[zone] = true
	} else {
		delete(g.book.Stockout, zone)
		for _, in := range g.sortedInstances() {
			if in.Zone == zone && in.Waiting != "" {
				in.Waiting = ""
				g.place(in)
				g.kick(in)
			}
		}
	}
	g.saveLogged()
}

// TimeoutNext makes the next mutating call that succeeds carry out its
// change and then return an error wrapping cloud.ErrTransient, as a call
// whose operation outlived its deadline does (the contract suite's hook).
func (g *Groups) TimeoutNext() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.timeouts++
}

// Settle returns once no instance is being created, recreated or deleted,
// but for those that wait for quota or capacity.
func (g *Groups) Settle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		g.changed.Broadcast()
		g.mu.Unlock()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		busy := ""
		for _, in := range g.sortedInstances() {
			if g.working[in.Name] || in.Status == cloud.StatusDeleting || (creatingStatus(in.Status) && in.Waiting == "") {
				busy = in.Name + " " + string(in.Status)
				break
			}
		}
		if busy == "" {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: instance %s: %w", ErrNotReady, busy, err)
		}
		g.changed.Wait()
	}
}

// Instances lists every instance of the lab, sorted by name.
func (g *Groups) Instances() []cloud.Instance {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []cloud.Instance
	for _, in := range g.sortedInstances() {
		out = append(out, g.instanceOf(in))
	}
	return out
}

var labelRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

func validName(kind, name string) error {
	if !labelRE.MatchString(name) {
		return fmt.Errorf("lab: %s name %q is not a lower-case DNS label of at most 63 characters: %w", kind, name, cloud.ErrInvalid)
	}
	return nil
}

// mutate runs fn under the lock as one request: a request ID carried out
// before changes nothing and succeeds; TimeoutNext turns a success into
// ErrTransient after the change. The book is saved after a change.
func (g *Groups) mutate(ctx context.Context, method string, ref cloud.GroupRef, args, req string, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if req == "" {
		return fmt.Errorf("lab: %s without a request ID: %w", method, cloud.ErrInvalid)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	id := cloud.RequestID(req, method+" "+ref.String()+" "+args)
	if g.book.Requests[id] {
		return nil
	}
	if err := fn(); err != nil {
		return err
	}
	g.book.Requests[id] = true
	g.changed.Broadcast()
	if err := g.saveLocked(); err != nil {
		return fmt.Errorf("lab: %s: %v: %w", method, err, cloud.ErrTransient)
	}
	if g.timeouts > 0 {
		g.timeouts--
		return fmt.Errorf("lab: %s: still running at its deadline (injected): %w", method, cloud.ErrTransient)
	}
	return nil
}

func (g *Groups) group(ref cloud.GroupRef) (*bookGroup, error) {
	grp, ok := g.book.Groups[groupKey(ref)]
	if !ok {
		return nil, fmt.Errorf("lab: group %s: %w", ref, cloud.ErrNotFound)
	}
	return grp, nil
}

// EnsureTemplate implements cloud.Provider: a template is a release the
// lab can boot hosts at; Base, when given, must be a template.
func (g *Groups) EnsureTemplate(ctx context.Context, spec cloud.TemplateSpec, req string) (string, error) {
	if spec.Release == "" {
		return "", fmt.Errorf("lab: a template needs a release: %w", cloud.ErrInvalid)
	}
	// Checked outside the lock: it may build the release's images once.
	if err := g.m.checkRelease(ctx, spec.Release); err != nil {
		return "", err
	}
	name := cloud.TemplateName(spec)
	err := g.mutate(ctx, "EnsureTemplate", cloud.GroupRef{}, "release="+spec.Release+" base="+spec.Base, req, func() error {
		if spec.Base != "" {
			release, ok := g.book.Templates[spec.Base]
			if !ok {
				return fmt.Errorf("lab: base template %q: %w", spec.Base, cloud.ErrNotFound)
			}
			if release == spec.Release {
				name = spec.Base // already the release's template
				return nil
			}
		}
		g.book.Templates[name] = spec.Release
		return nil
	})
	if err != nil {
		return "", err
	}
	// A repeated request reports the name it made the first time.
	if spec.Base != "" {
		g.mu.Lock()
		if g.book.Templates[spec.Base] == spec.Release {
			name = spec.Base
		}
		g.mu.Unlock()
	}
	return name, nil
}

// GetGroup implements cloud.Provider.
func (g *Groups) GetGroup(ctx context.Context, ref cloud.GroupRef) (cloud.Group, error) {
	if err := ctx.Err(); err != nil {
		return cloud.Group{}, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	grp, err := g.group(ref)
	if err != nil {
		return cloud.Group{}, err
	}
	out := cloud.Group{GroupRef: ref, Template: grp.Template, Stable: true, Autoscaling: grp.Autoscaling}
	for _, in := range g.members(ref) {
		if in.Status != cloud.StatusDeleting {
			out.TargetSize++
		}
		if in.Status != cloud.StatusRunning && in.Status != cloud.StatusStopped {
			out.Stable = false
		}
	}
	return out, nil
}

// CreateGroup implements cloud.Provider. The group's instances are named
// "<group>-1", "<group>-2", … (a number already taken in the lab is
// skipped).
func (g *Groups) CreateGroup(ctx context.Context, ref cloud.GroupRef, template string, size int, req string) error {
	return g.mutate(ctx, "CreateGroup", ref, fmt.Sprintf("template=%s size=%d", template, size), req, func() error {
		if err := validName("zone", ref.Zone); err != nil {
			return err
		}
		if err := validName("group", ref.Name); err != nil {
			return err
		}
		if size < 0 {
			return fmt.Errorf("lab: group size %d: %w", size, cloud.ErrInvalid)
		}
		if _, ok := g.book.Groups[groupKey(ref)]; ok {
			return nil
		}
		if _, ok := g.book.Templates[template]; !ok {
			return fmt.Errorf("lab: template %q: %w", template, cloud.ErrNotFound)
		}
		if err := g.quotaFor(ref.Zone, size); err != nil {
			return err
		}
		if free := g.freeAddresses(); free < size {
			return fmt.Errorf("lab: %d instances asked, %d addresses left in %s: %w", size, free, Subnet, cloud.ErrQuota)
		}
		grp := &bookGroup{Zone: ref.Zone, Name: ref.Name, Template: template}
		g.book.Groups[groupKey(ref)] = grp
		g.grow(grp, size)
		return nil
	})
}

// DeleteGroup implements cloud.Provider. The group is gone when the call
// returns; the call waits until its instances' hosts are removed too.
func (g *Groups) DeleteGroup(ctx context.Context, ref cloud.GroupRef, req string) error {
	err := g.mutate(ctx, "DeleteGroup", ref, "", req, func() error {
		grp, ok := g.book.Groups[groupKey(ref)]
		if !ok {
			return nil
		}
		for _, in := range g.members(ref) {
			in.Gone = true
			g.remove(in)
		}
		delete(g.book.Groups, groupKey(grp.GroupRef()))
		return nil
	})
	if err != nil && !errors.Is(err, cloud.ErrTransient) {
		return err
	}
	if werr := g.waitGone(ctx, func(in *bookInstance) bool { return in.Zone == ref.Zone && in.Group == ref.Name }); werr != nil {
		return werr
	}
	return err
}

// GroupRef is the group's reference.
func (b *bookGroup) GroupRef() cloud.GroupRef { return cloud.GroupRef{Zone: b.Zone, Name: b.Name} }

// SetTemplate implements cloud.Provider.
func (g *Groups) SetTemplate(ctx context.Context, ref cloud.GroupRef, template string, req string) error {
	return g.mutate(ctx, "SetTemplate", ref, "template="+template, req, func() error {
		grp, err := g.group(ref)
		if err != nil {
			return err
		}
		if _, ok := g.book.Templates[template]; !ok {
			return fmt.Errorf("lab: template %q: %w", template, cloud.ErrNotFound)
		}
		grp.Template = template
		return nil
	})
}

// Resize implements cloud.Provider. Shrinking removes instances that do
// not run first, then those with the greatest names.
func (g *Groups) Resize(ctx context.Context, ref cloud.GroupRef, size int, req string) error {
	return g.mutate(ctx, "Resize", ref, fmt.Sprintf("size=%d", size), req, func() error {
		if size < 0 {
			return fmt.Errorf("lab: group size %d: %w", size, cloud.ErrInvalid)
		}
		grp, err := g.group(ref)
		if err != nil {
			return err
		}
		var live []*bookInstance
		for _, in := range g.members(ref) {
			if in.Status != cloud.StatusDeleting {
				live = append(live, in)
			}
		}
		n := len(live)
		if size > n {
			if err := g.quotaFor(ref.Zone, size-n); err != nil {
				return err
			}
			if free := g.freeAddresses(); free < size-n {
				return fmt.Errorf("lab: %d more instances asked, %d addresses left in %s: %w", size-n, free, Subnet, cloud.ErrQuota)
			}
			g.grow(grp, size-n)
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
			g.remove(in)
		}
		return nil
	})
}

// SetAutoscaling implements cloud.Provider. The lab runs no autoscaler:
// the limits are kept for GetGroup, as a group's autoscaler would hold
// them.
func (g *Groups) SetAutoscaling(ctx context.Context, ref cloud.GroupRef, a cloud.Autoscaling, req string) error {
	return g.mutate(ctx, "SetAutoscaling", ref, fmt.Sprintf("min=%d max=%d", a.Min, a.Max), req, func() error {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		grp, err := g.group(ref)
		if err != nil {
			return err
		}
		grp.Autoscaling = a
		return nil
	})
}

// ListInstances implements cloud.Provider.
func (g *Groups) ListInstances(ctx context.Context, ref cloud.GroupRef) ([]cloud.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, err := g.group(ref); err != nil {
		return nil, err
	}
	var out []cloud.Instance
	for _, in := range g.members(ref) {
		out = append(out, g.instanceOf(in))
	}
	return out, nil
}

// CreateInstances implements cloud.Provider. A name another group of the
// lab holds is ErrConflict (names are hostnames), as is a topology host's.
func (g *Groups) CreateInstances(ctx context.Context, ref cloud.GroupRef, names []string, req string) error {
	return g.mutate(ctx, "CreateInstances", ref, fmt.Sprintf("names=%v", names), req, func() error {
		grp, err := g.group(ref)
		if err != nil {
			return err
		}
		var fresh []string
		for _, n := range names {
			if err := validName("instance", n); err != nil {
				return err
			}
			in, ok := g.book.Instances[n]
			switch {
			case g.reserved[n]:
				return fmt.Errorf("lab: instance name %q is a host of the lab's topology: %w", n, cloud.ErrConflict)
			case ok && in.Status == cloud.StatusDeleting:
				return fmt.Errorf("lab: instance %q is still being deleted: %w", n, cloud.ErrTransient)
			case ok && (in.Zone != ref.Zone || in.Group != ref.Name):
				return fmt.Errorf("lab: instance name %q is taken by group %s/%s: %w", n, in.Zone, in.Group, cloud.ErrConflict)
			case !ok && !slices.Contains(fresh, n):
				fresh = append(fresh, n)
			}
		}
		if err := g.quotaFor(ref.Zone, len(fresh)); err != nil {
			return err
		}
		if free := g.freeAddresses(); free < len(fresh) {
			return fmt.Errorf("lab: %d instances asked, %d addresses left in %s: %w", len(fresh), free, Subnet, cloud.ErrQuota)
		}
		for _, n := range fresh {
			g.add(grp, n)
		}
		return nil
	})
}

// DeleteInstances implements cloud.Provider. The instances are DELETING
// until their hosts are removed.
func (g *Groups) DeleteInstances(ctx context.Context, ref cloud.GroupRef, names []string, req string) error {
	return g.mutate(ctx, "DeleteInstances", ref, fmt.Sprintf("names=%v", names), req, func() error {
		for _, n := range names {
			if err := validName("instance", n); err != nil {
				return err
			}
		}
		for _, n := range names {
			if in, ok := g.book.Instances[n]; ok && in.Zone == ref.Zone && in.Group == ref.Name && !in.Gone {
				g.remove(in)
			}
		}
		return nil
	})
}

// RecreateInstances implements cloud.Provider: a new host under the same
// name, address and provider ID, from the group's template; the Node
// object is kept, as a cloud keeps it.
func (g *Groups) RecreateInstances(ctx context.Context, ref cloud.GroupRef, names []string, req string) error {
	return g.mutate(ctx, "RecreateInstances", ref, fmt.Sprintf("names=%v", names), req, func() error {
		grp, err := g.group(ref)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := validName("instance", n); err != nil {
				return err
			}
		}
		for _, n := range names {
			in, ok := g.book.Instances[n]
			if !ok || in.Zone != ref.Zone || in.Group != ref.Name || in.Status == cloud.StatusDeleting {
				continue
			}
			in.Template, in.Status, in.Error, in.Waiting = grp.Template, cloud.StatusRecreating, "", ""
			in.Gen++
			g.place(in)
			g.kick(in)
		}
		return nil
	})
}

// Quota implements cloud.Provider: the zone's limit (0: unlimited) and its
// instances that hold quota (every one not deleting and not waiting).
func (g *Groups) Quota(ctx context.Context, zone string) (cloud.Quota, error) {
	if err := ctx.Err(); err != nil {
		return cloud.Quota{}, err
	}
	if zone == "" {
		return cloud.Quota{}, fmt.Errorf("lab: quota of no zone: %w", cloud.ErrInvalid)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return cloud.Quota{Limit: g.limit(zone), Usage: g.usage(zone, "")}, nil
}

// --- the book, under g.mu ---

func (g *Groups) limit(zone string) int {
	if l, ok := g.book.Quota[zone]; ok {
		return l
	}
	return g.cfg.Quota
}

// usage counts zone's instances that hold quota, but for skip.
func (g *Groups) usage(zone, skip string) int {
	n := 0
	for _, in := range g.book.Instances {
		if in.Zone == zone && in.Name != skip && in.Status != cloud.StatusDeleting && in.Waiting == "" {
			n++
		}
	}
	return n
}

// quotaFor refuses n more instances in zone when its quota cannot hold
// them: nothing is created.
func (g *Groups) quotaFor(zone string, n int) error {
	if limit := g.limit(zone); n > 0 && limit > 0 && g.usage(zone, "")+n > limit {
		return fmt.Errorf("lab: zone %s: %d more instances, %d of %d in use: %w", zone, n, g.usage(zone, ""), limit, cloud.ErrQuota)
	}
	return nil
}

// place decides whether a (re)created instance may boot now: not in a
// stockout, and within quota.
func (g *Groups) place(in *bookInstance) {
	in.Waiting = ""
	switch {
	case g.book.Stockout[in.Zone]:
		in.Waiting = "stockout"
	case g.limit(in.Zone) > 0 && g.usage(in.Zone, in.Name) >= g.limit(in.Zone):
		in.Waiting = "quota"
	}
}

func (g *Groups) members(ref cloud.GroupRef) []*bookInstance {
	var out []*bookInstance
	for _, in := range g.sortedInstances() {
		if in.Zone == ref.Zone && in.Group == ref.Name && !in.Gone {
			out = append(out, in)
		}
	}
	return out
}

func (g *Groups) sortedInstances() []*bookInstance {
	out := make([]*bookInstance, 0, len(g.book.Instances))
	for _, in := range g.book.Instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// grow adds n instances with names the lab chooses.
func (g *Groups) grow(grp *bookGroup, n int) {
	for range n {
		var name string
		for {
			grp.Seq++
			name = fmt.Sprintf("%s-%d", grp.Name, grp.Seq)
			if _, taken := g.book.Instances[name]; !taken && !g.reserved[name] && len(name) <= 63 {
				break
			}
		}
		g.add(grp, name)
	}
}

func (g *Groups) add(grp *bookGroup, name string) {
	in := &bookInstance{Name: name, Zone: grp.Zone, Group: grp.Name, IP: g.allocate(), Template: grp.Template,
		Status: cloud.StatusCreating, Gen: 1}
	g.book.Instances[name] = in
	g.place(in)
	g.kick(in)
}

// remove marks an instance for deletion; its worker removes the host and
// then the instance.
func (g *Groups) remove(in *bookInstance) {
	in.Status, in.Waiting = cloud.StatusDeleting, ""
	g.kick(in)
}

// freeAddresses is how many instance addresses are left.
func (g *Groups) freeAddresses() int {
	return lastInstanceOctet - firstInstanceOctet + 1 - len(g.book.Instances)
}

// allocate returns the lowest instance address no instance holds.
func (g *Groups) allocate() string {
	used := map[string]bool{}
	for _, in := range g.book.Instances {
		used[in.IP] = true
	}
	for o := firstInstanceOctet; o <= lastInstanceOctet; o++ {
		ip := fmt.Sprintf("10.77.0.%d", o)
		if !used[ip] {
			return ip
		}
	}
	return "" // freeAddresses was checked first
}

func (g *Groups) machineOf(in *bookInstance) machine {
	return machine{Name: in.Name, Zone: in.Zone, Group: in.Group, IP: in.IP, Release: g.book.Templates[in.Template]}
}

func (g *Groups) instanceOf(in *bookInstance) cloud.Instance {
	out := cloud.Instance{Name: in.Name, ProviderID: InstanceProviderID(in.Zone, in.Group, in.Name), Template: in.Template, Status: in.Status}
	switch {
	case in.Waiting == "stockout":
		out.LastError = fmt.Errorf("lab: zone %s has no capacity: %w", in.Zone, cloud.ErrStockout)
	case in.Waiting == "quota":
		out.LastError = fmt.Errorf("lab: zone %s: quota of %d instances in use: %w", in.Zone, g.limit(in.Zone), cloud.ErrQuota)
	case in.Error != "":
		out.LastError = errors.New(in.Error)
	}
	return out
}

func creatingStatus(s cloud.InstanceStatus) bool {
	return s == cloud.StatusCreating || s == cloud.StatusRecreating
}

// saveLocked writes the book (atomically: a new file renamed over it).
func (g *Groups) saveLocked() error {
	if g.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(g.book, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(g.path), 0o700); err != nil {
		return err
	}
	tmp := g.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, g.path)
}

func (g *Groups) saveLogged() {
	if err := g.saveLocked(); err != nil {
		g.log.Warn("save the lab's instance groups", "err", err)
	}
}

// --- the workers ---

// kick starts in's worker unless it has one; the worker brings the host
// to what the book says.
func (g *Groups) kick(in *bookInstance) {
	if g.working[in.Name] || g.ctx.Err() != nil {
		return
	}
	g.working[in.Name] = true
	g.wg.Add(1)
	go g.work(in.Name)
}

// work brings one instance's host to what the book says, step by step,
// until they agree or the instance waits; the book may change between
// steps (a delete during a boot), and each step starts from what it says
// then.
func (g *Groups) work(name string) {
	defer g.wg.Done()
	failures := 0
	for {
		g.mu.Lock()
		in, ok := g.book.Instances[name]
		if !ok || g.ctx.Err() != nil {
			delete(g.working, name)
			g.changed.Broadcast()
			g.mu.Unlock()
			return
		}
		m, up, gen := g.machineOf(in), g.hostUp[name], in.Gen
		switch {
		case in.Status == cloud.StatusDeleting:
			g.mu.Unlock()
			err := g.m.stop(g.ctx, m, false)
			g.mu.Lock()
			if err != nil {
				g.log.Warn("lab instance: removing its host failed; trying again", "instance", name, "err", err)
				g.mu.Unlock()
				if !g.pause() {
					g.mu.Lock()
					delete(g.working, name)
					g.mu.Unlock()
					return
				}
				continue
			}
			delete(g.book.Instances, name)
			delete(g.hostUp, name)
			g.saveLogged()
			g.changed.Broadcast()
			g.mu.Unlock()
			continue
		case !creatingStatus(in.Status) || in.Waiting != "":
			// Running, stopped, or waiting for quota or capacity.
			delete(g.working, name)
			g.changed.Broadcast()
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		if up {
			// A recreate: the old host goes first; its Node stays.
			if err := g.m.stop(g.ctx, m, true); err != nil {
				g.log.Warn("lab instance: stopping its old host failed; trying again", "instance", name, "err", err)
				if !g.pause() {
					g.mu.Lock()
					delete(g.working, name)
					g.mu.Unlock()
					return
				}
				continue
			}
			g.mu.Lock()
			g.hostUp[name] = false
			g.mu.Unlock()
		}
		var err error
		select {
		case g.sem <- struct{}{}:
			err = g.m.start(g.ctx, m)
			<-g.sem
		case <-g.ctx.Done():
			err = g.ctx.Err()
		}
		g.mu.Lock()
		in, ok = g.book.Instances[name]
		switch {
		case err != nil && g.ctx.Err() != nil:
		case err != nil:
			failures++
			g.log.Warn("lab instance: booting its host failed", "instance", name, "attempt", failures, "err", err)
			if ok && failures >= bootAttempts && in.Gen == gen && creatingStatus(in.Status) {
				in.Status, in.Error = cloud.StatusStopped, fmt.Sprintf("lab: booting the host of %s failed %d times: %v", name, failures, err)
				g.saveLogged()
			}
		default:
			failures = 0
			g.hostUp[name] = true
			if ok && in.Gen == gen && creatingStatus(in.Status) {
				in.Status, in.HostGen = cloud.StatusRunning, gen
				g.saveLogged()
			}
		}
		g.changed.Broadcast()
		g.mu.Unlock()
		if err != nil && !g.pause() {
			g.mu.Lock()
			delete(g.working, name)
			g.changed.Broadcast()
			g.mu.Unlock()
			return
		}
	}
}

// pause waits a moment before a worker tries again; false when the
// groups are closing.
func (g *Groups) pause() bool {
	select {
	case <-g.ctx.Done():
		return false
	case <-afterRetry():
		return true
	}
}

// waitGone waits until no instance that match selects remains.
func (g *Groups) waitGone(ctx context.Context, match func(*bookInstance) bool) error {
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		g.changed.Broadcast()
		g.mu.Unlock()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		left := ""
		for _, in := range g.sortedInstances() {
			if match(in) {
				left = in.Name
				break
			}
		}
		if left == "" {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("lab: instance %s is still being deleted: %v: %w", left, err, cloud.ErrTransient)
		}
		if g.ctx.Err() != nil {
			return fmt.Errorf("lab: the instance groups are closing: %w", cloud.ErrTransient)
		}
		g.changed.Wait()
	}
}

// instanceAddr is the instance address's last octet (for names derived
// from it).
func instanceAddr(ip string) (int, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return 0, fmt.Errorf("%w: instance address %q", ErrNetwork, ip)
	}
	return int(a.As4()[3]), nil
}
