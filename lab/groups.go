package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/memory"
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
// The book — groups, templates, instances, the request IDs carried out,
// quota and stockout per zone — is the in-memory cloud's (cloud/memory),
// kept in <state>/groups.json; Groups is its Driver and hands the hosts to
// its machines: the real ones (instances.go), or a fake for the unit tests.
// Calls return once the book changed; hosts boot and stop in the
// background, one worker per instance, and ListInstances shows where each
// is.

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

// Groups is the lab's instance groups; Lab.Groups or NewGroups makes one.
// The cloud.Provider and the hooks (SetQuota, SetStockout, TimeoutNext,
// Instances) are the book's.
type Groups struct {
	*memory.Cloud
	d *hostDriver
}

// hostDriver is the book's driver: it boots and removes the hosts.
type hostDriver struct {
	c   *memory.Cloud
	m   machines
	log *slog.Logger

	mu sync.Mutex
	// working are the instances with a worker; again those woken while
	// their worker looked, which must look once more.
	working map[string]bool
	again   map[string]bool
	hostUp  map[string]bool // instances whose host runs

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{}
}

// newGroups opens the book at path (created when missing) over m.
func newGroups(cfg GroupsConfig, m machines, path string, reserved []string, log *slog.Logger) (*Groups, error) {
	if cfg.Parallel < 1 {
		cfg.Parallel = 2
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &hostDriver{m: m, log: log, working: map[string]bool{}, again: map[string]bool{}, hostUp: map[string]bool{},
		sem: make(chan struct{}, cfg.Parallel)}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	res := map[string]string{}
	for _, n := range reserved {
		res[n] = "a host of the lab's topology"
	}
	c, err := memory.Open(memory.Options{
		Name: "lab", SyncQuota: true, Quota: cfg.Quota, Reserved: res,
		Machines: lastInstanceOctet - firstInstanceOctet + 1, MachinesAre: "addresses in " + Subnet,
		ProviderID: func(g cloud.GroupRef, name string) string { return InstanceProviderID(g.Zone, g.Name, name) },
		Driver:     d, File: path, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHost, err)
	}
	d.c = c
	// Pick up where the last keeper of the book stopped: hosts that run
	// are kept; an instance whose host was lost while it ran is STOPPED;
	// every unfinished change gets its worker again.
	for _, in := range c.Instances() {
		want, ok := c.Machine(in.Name)
		if !ok {
			continue
		}
		up := m.running(machineOf(want))
		d.mu.Lock()
		d.hostUp[in.Name] = up
		d.mu.Unlock()
		if want.Status == cloud.StatusRunning && !up {
			c.Failed(in.Name, want.Gen, errors.New("the host was not running when the lab's instance groups started"))
		}
		d.Wake(in.Name)
	}
	return &Groups{Cloud: c, d: d}, nil
}

// Close stops the workers (a host being booted is left to the next keeper
// of the book, which boots it again) and waits for them.
func (g *Groups) Close() {
	g.d.mu.Lock()
	g.d.cancel()
	g.d.mu.Unlock()
	g.d.wg.Wait()
	g.Cloud.Close()
}

// Settle returns once no instance is being created, recreated or deleted,
// but for those that wait for quota or capacity.
func (g *Groups) Settle(ctx context.Context) error {
	if err := g.Cloud.Settle(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	return nil
}

// address is the instance's address ("" when there is no such instance).
func (g *Groups) address(name string) string {
	if m, ok := g.Machine(name); ok {
		return machineOf(m).IP
	}
	return ""
}

func machineOf(m memory.Machine) machine {
	return machine{Name: m.Name, Zone: m.Group.Zone, Group: m.Group.Name, Release: m.Release,
		IP: fmt.Sprintf("10.77.0.%d", firstInstanceOctet+m.Slot)}
}

// CheckRelease implements memory.Driver.
func (d *hostDriver) CheckRelease(ctx context.Context, release string) error {
	return d.m.checkRelease(ctx, release)
}

// Wake implements memory.Driver: it starts the instance's worker unless
// it has one, which then looks again.
func (d *hostDriver) Wake(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx.Err() != nil {
		return
	}
	if d.working[name] {
		d.again[name] = true
		return
	}
	d.working[name] = true
	d.wg.Add(1)
	go d.work(name)
}

// idle ends the worker of name unless it was woken since it last looked.
func (d *hostDriver) idle(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.again[name] && d.ctx.Err() == nil {
		delete(d.again, name)
		return false
	}
	delete(d.again, name)
	delete(d.working, name)
	return true
}

func (d *hostDriver) up(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hostUp[name]
}

func (d *hostDriver) setUp(name string, up bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if up {
		d.hostUp[name] = true
	} else {
		delete(d.hostUp, name)
	}
}

// work brings one instance's host to what the book wants, step by step,
// until they agree or the instance waits; the book may change between
// steps (a delete during a boot), and each step starts from what it says
// then.
func (d *hostDriver) work(name string) {
	defer d.wg.Done()
	failures, failedGen := 0, 0
	for {
		want, ok := d.c.Machine(name)
		if d.ctx.Err() != nil || !ok || want.Want == memory.WantNothing {
			if d.idle(name) {
				return
			}
			continue
		}
		m := machineOf(want)
		if want.Want == memory.WantGone {
			if err := d.m.stop(d.ctx, m, false); err != nil {
				d.log.Warn("lab instance: removing its host failed; trying again", "instance", name, "err", err)
				d.pause()
				continue
			}
			d.setUp(name, false)
			d.c.Removed(name)
			continue
		}
		if d.up(name) {
			// A recreate: the old host goes first; its Node stays.
			if err := d.m.stop(d.ctx, m, true); err != nil {
				d.log.Warn("lab instance: stopping its old host failed; trying again", "instance", name, "err", err)
				d.pause()
				continue
			}
			d.setUp(name, false)
		}
		var err error
		select {
		case d.sem <- struct{}{}:
			err = d.m.start(d.ctx, m)
			<-d.sem
		case <-d.ctx.Done():
			err = d.ctx.Err()
		}
		switch {
		case err != nil && d.ctx.Err() != nil:
		case err != nil:
			if failedGen != want.Gen {
				failures, failedGen = 0, want.Gen
			}
			failures++
			d.log.Warn("lab instance: booting its host failed", "instance", name, "attempt", failures, "err", err)
			if failures >= bootAttempts {
				d.c.Failed(name, want.Gen, fmt.Errorf("lab: booting the host of %s failed %d times: %v", name, failures, err))
			}
			d.pause()
		default:
			failures = 0
			d.setUp(name, true)
			d.c.Running(name, want.Gen)
		}
	}
}

// pause waits a moment before a worker tries again (not at all when the
// groups are closing).
func (d *hostDriver) pause() {
	select {
	case <-d.ctx.Done():
	case <-afterRetry():
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
