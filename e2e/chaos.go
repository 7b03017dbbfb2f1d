package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/lab"
)

// ChaosConfig configures the chaos of one upgrade.
type ChaosConfig struct {
	// Seed draws the schedule (Schedule).
	Seed    uint64
	Profile ChaosProfile
	// Out receives a line per fault as it fires and heals.
	Out io.Writer
}

// FaultRecord is a scheduled fault and what became of it.
type FaultRecord struct {
	Fault
	Fired bool
	// At is when it fired, from the upgrade's start; Lasted how long it
	// was in place.
	At, Lasted time.Duration
	// Target is what it acted on ("c2 (leader)", "worker-1"); Seen where
	// the upgrade was when it fired.
	Target, Seen string
	// Waited is how long it waited for another member fault to heal.
	Waited time.Duration
	// Next is the time from the fault to the next transition the
	// coordinator committed (a step or node step starting or ending) or
	// an agent began (an operation); measured for faults of the leader.
	// An operation in flight at the fault runs on by itself, and the
	// step after it can only follow its end. Held is what the fault
	// itself held the upgrade up: the time to that next transition from
	// the new leader, or from the first operation in flight that ended
	// after it (its node's next step was due then).
	Next, Held time.Duration
	// NewLeader is the time from a fault of the leader until another
	// member said it led (zero: not seen within a minute).
	NewLeader time.Duration
	Err       string

	at, armed time.Time
}

// Chaos injects a schedule of faults into the next upgrade of an
// environment and collects what the invariants need: the upgrade's step
// starts, version samples, the hosts' files before the upgrade.
type Chaos struct {
	env    *Env
	cfg    ChaosConfig
	client *client.Client
	hc     *http.Client
	cg     *memberCgroups
	swap   artifactSwap
	prevID string
	began  time.Time

	stop, healNow chan struct{}
	loops, faults sync.WaitGroup
	halted        sync.Once

	mu          sync.Mutex
	u           *api.Upgrade
	records     []*FaultRecord
	starts      map[string]map[int]time.Time
	transitions []time.Time
	memberBusy  bool
	frozen      map[*Member]bool
	samples     []VersionSample
	before      map[string]HostFiles
}

// StartChaos follows the next upgrade the environment runs (the first one
// whose ID differs from the current one) and injects faults drawn from
// cfg.Seed into it. Finish heals what is still in place and checks the
// invariants.
func (e *Env) StartChaos(ctx context.Context, cfg ChaosConfig) (*Chaos, error) {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	c := &Chaos{env: e, cfg: cfg, began: time.Now(), stop: make(chan struct{}), healNow: make(chan struct{}),
		starts: map[string]map[int]time.Time{}, frozen: map[*Member]bool{}}
	tr := e.hc.Transport.(*http.Transport).Clone()
	client.ConfigureTransport(tr)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, client.DialTimeout)
		defer cancel()
		return e.Lab.Network().DialContext(ctx, network, addr)
	}
	c.hc = &http.Client{Transport: tr, Timeout: 15 * time.Second}
	var urls []string
	for _, m := range e.Members {
		urls = append(urls, m.URL())
	}
	c.client = client.NewEndpoints(urls, c.hc)
	c.client.SetBearerToken(e.adminToken)
	if u, err := c.upgrade(ctx); err == nil {
		c.prevID = u.ID
	}
	cg, err := newMemberCgroups(e.Lab.Config().Prefix, e.Lab.Network().LabNS())
	if err != nil {
		return nil, err
	}
	c.cg = cg
	if err := cg.tag(ctx, e.Members); err != nil {
		return nil, err
	}
	c.before = map[string]HostFiles{}
	for _, h := range e.Lab.Config().Topology.Hosts {
		f, err := readHostFiles(e.Lab, h.Name)
		if err != nil {
			return nil, err
		}
		c.before[h.Name] = f
	}
	c.loops.Add(3)
	go c.follow(ctx)
	go c.sweep(ctx)
	go c.sample(ctx)
	return c, nil
}

// upgradeVia reads the cluster's current upgrade through cl within timeout.
func upgradeVia(ctx context.Context, cl *client.Client, timeout time.Duration) (*api.Upgrade, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var u api.Upgrade
	if _, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/"+ClusterName+"/upgrade", nil, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// upgrade reads the cluster's current upgrade from whichever member answers.
func (c *Chaos) upgrade(ctx context.Context) (*api.Upgrade, error) {
	return upgradeVia(ctx, c.client, 20*time.Second)
}

// memberClient is an admin client of member m alone.
func (c *Chaos) memberClient(m *Member) *client.Client {
	cl := client.New(m.URL(), c.hc)
	cl.SetBearerToken(c.env.adminToken)
	return cl
}

// every runs fn every d until Finish or ctx ends; it is one of c.loops.
func (c *Chaos) every(ctx context.Context, d time.Duration, fn func()) {
	defer c.loops.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn()
	}
}

// sweep reads the upgrade at every running member four times a second,
// each with a deadline of its own, and records the transitions each
// shows. follow's client stays on the member that answered last, and a
// member cut off from the others answers with what it last knew (reads
// are not linearizable: docs/api.md), so follow alone can miss the
// transitions the others commit meanwhile; every committed transition is
// real, whichever member shows it.
func (c *Chaos) sweep(ctx context.Context) {
	c.every(ctx, 250*time.Millisecond, func() {
		var wg sync.WaitGroup
		for _, m := range c.env.Members {
			if !m.Running() {
				continue
			}
			wg.Go(func() {
				u, err := upgradeVia(ctx, c.memberClient(m), time.Second)
				if err != nil {
					return
				}
				c.mu.Lock()
				defer c.mu.Unlock()
				if c.u != nil && u.ID == c.u.ID {
					c.recordLocked(u)
				}
			})
		}
		wg.Wait()
	})
}

// follow reads the upgrade four times a second, records what it sees and
// fires the faults whose trigger it passed.
func (c *Chaos) follow(ctx context.Context) {
	c.every(ctx, 250*time.Millisecond, func() {
		u, err := c.upgrade(ctx)
		if err != nil || u.ID == c.prevID {
			return
		}
		c.observe(ctx, u, time.Now())
	})
}

func (c *Chaos) observe(ctx context.Context, u *api.Upgrade, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.u == nil {
		var hosts []string
		for _, h := range c.env.Lab.Config().Topology.Hosts {
			hosts = append(hosts, h.Name)
		}
		sched := Schedule(c.cfg.Seed, u, c.cfg.Profile, hosts)
		fmt.Fprintf(c.cfg.Out, "chaos: seed %d, profile %s, %d faults for upgrade %s\n", c.cfg.Seed, c.cfg.Profile.Name, len(sched), u.ID)
		for _, f := range sched {
			c.records = append(c.records, &FaultRecord{Fault: f})
			fmt.Fprintf(c.cfg.Out, "chaos:   %s\n", f.Describe())
		}
	}
	c.u = u
	c.recordLocked(u)
	if !u.InProgress {
		return
	}
	c.fireLocked(ctx, u, now)
}

// recordLocked records the transitions and step starts u shows. c.mu is
// held.
func (c *Chaos) recordLocked(u *api.Upgrade) {
	record := func(t time.Time) {
		if !t.IsZero() && !slices.Contains(c.transitions, t) {
			c.transitions = append(c.transitions, t)
		}
	}
	for i := range u.Nodes {
		n := &u.Nodes[i]
		record(n.StartedAt)
		record(n.StepStartedAt)
		record(n.FinishedAt)
		if n.State == api.StepRunning && !n.StepStartedAt.IsZero() {
			if c.starts[n.Node] == nil {
				c.starts[n.Node] = map[int]time.Time{}
			}
			if _, ok := c.starts[n.Node][n.Cursor]; !ok {
				c.starts[n.Node][n.Cursor] = n.StepStartedAt
			}
		}
	}
	for _, s := range u.Steps {
		record(s.StartedAt)
		record(s.FinishedAt)
	}
}

// fireLocked fires the faults whose trigger u passed. c.mu is held.
func (c *Chaos) fireLocked(ctx context.Context, u *api.Upgrade, now time.Time) {
	for _, r := range c.records {
		if r.Fired {
			continue
		}
		if r.armed.IsZero() {
			if !triggered(u, r.Trigger) {
				continue
			}
			r.armed = now
		}
		if now.Before(r.armed.Add(r.Trigger.Delay)) {
			continue
		}
		if r.Kind.memberFault() && c.memberBusy {
			continue // fires when the member fault in place heals
		}
		if r.Kind.memberFault() {
			c.memberBusy = true
		}
		r.Fired, r.at = true, now
		r.At = now.Sub(u.CreatedAt)
		r.Waited = now.Sub(r.armed.Add(r.Trigger.Delay))
		r.Seen = where(u)
		c.faults.Add(1)
		go c.inject(ctx, r)
	}
}

// triggered reports whether u has reached tr.
func triggered(u *api.Upgrade, tr Trigger) bool {
	if tr.StepID != "" {
		s, ok := u.Step(tr.StepID)
		return ok && !s.StartedAt.IsZero()
	}
	n, ok := u.Node(tr.Node)
	if !ok {
		return false
	}
	return (n.State == api.StepRunning && n.Cursor >= tr.Cursor) || n.State == api.StepDone
}

// inject puts a fault in place, waits its duration (or Finish) and heals it.
func (c *Chaos) inject(ctx context.Context, r *FaultRecord) {
	defer c.faults.Done()
	var heal func(context.Context) error
	err := func() error {
		ictx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var err error
		heal, err = c.apply(ictx, r)
		return err
	}()
	c.mu.Lock()
	if err != nil {
		r.Err = err.Error()
	}
	c.mu.Unlock()
	fmt.Fprintf(c.cfg.Out, "chaos: +%.1fs %s → %s (%s)%s\n", r.At.Seconds(), r.Kind, r.Target, r.Seen, errNote(err))
	if heal != nil {
		select {
		case <-time.After(r.Duration):
		case <-c.healNow:
		}
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		herr := heal(hctx)
		cancel()
		c.mu.Lock()
		r.Lasted = time.Since(r.at)
		if herr != nil {
			r.Err = strings.TrimSpace(r.Err + "; heal: " + herr.Error())
		}
		c.mu.Unlock()
		fmt.Fprintf(c.cfg.Out, "chaos: healed %s on %s after %s%s\n", r.Kind, r.Target, r.Lasted.Round(100*time.Millisecond), errNote(herr))
	}
	if r.Kind.memberFault() {
		c.mu.Lock()
		c.memberBusy = false
		c.mu.Unlock()
	}
}

func errNote(err error) string {
	if err == nil {
		return ""
	}
	return " FAILED: " + err.Error()
}

// apply puts r in place and returns what heals it (nil: nothing to heal).
func (c *Chaos) apply(ctx context.Context, r *FaultRecord) (func(context.Context) error, error) {
	e := c.env
	coordinator := filepath.Join(e.cfg.BinDir, "molt-coordinator")
	setTarget := func(s string) {
		c.mu.Lock()
		r.Target = s
		c.mu.Unlock()
	}
	switch r.Kind {
	case FaultLeaderKill, FaultFollowerKill, FaultLeaderFreeze, FaultFollowerFreeze, FaultPartition:
		leaderFault := r.Fault.ofLeader()
		m, err := c.member(ctx, leaderFault, r.Pick)
		if err != nil {
			return nil, err
		}
		role := "follower"
		if leaderFault {
			role = "leader"
		}
		setTarget(m.ID + " (" + role + ")")
		if leaderFault {
			c.faults.Add(1)
			go c.timeNewLeader(context.WithoutCancel(ctx), r, m) // ctx ends with apply
		}
		switch r.Kind {
		case FaultLeaderKill, FaultFollowerKill:
			m.Kill()
			return func(ctx context.Context) error {
				if err := m.start(coordinator, e.Lab.Network().LabNS()); err != nil {
					return err
				}
				return c.cg.tag(ctx, e.Members)
			}, nil
		case FaultLeaderFreeze, FaultFollowerFreeze:
			if err := m.signal(syscall.SIGSTOP); err != nil {
				return nil, err
			}
			c.setFrozen(m, true)
			return func(context.Context) error {
				defer c.setFrozen(m, false)
				return m.signal(syscall.SIGCONT)
			}, nil
		default:
			if err := c.cg.partition(ctx, m, e.Members); err != nil {
				return nil, err
			}
			return c.cg.heal, nil
		}
	case FaultAgentKill:
		setTarget(r.Host)
		_, err := e.Lab.Exec(ctx, r.Host, "systemctl", "kill", "--kill-who=main", "-s", "KILL", "molt-agent.service")
		return nil, err
	case FaultLinkCut:
		setTarget(r.Host)
		ns := e.Lab.Network().HostNS(r.Host)
		if err := cutLink(ctx, ns, e.Members); err != nil {
			return nil, err
		}
		return func(ctx context.Context) error { return nftDelete(ctx, ns, linkTable) }, nil
	case FaultAPILBDown:
		lbs := e.Lab.Config().Topology.WithRole(lab.RoleControlPlaneLB)
		if len(lbs) == 0 {
			return nil, errors.New("the lab has no control-plane LB host")
		}
		host := lbs[0].Name
		ns := e.Lab.Network().HostNS(host)
		if r.Variant == "host" {
			setTarget(host + " (whole host)")
			if err := isolateHost(ctx, ns); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error { return nftDelete(ctx, ns, hostTable) }, nil
		}
		pids, err := processesIn(ns, "cplb")
		if err != nil {
			return nil, err
		}
		if len(pids) == 0 {
			return nil, fmt.Errorf("no cplb process on %s", host)
		}
		setTarget(fmt.Sprintf("%s (cplb proxy, pid %v)", host, pids))
		for _, p := range pids {
			if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
				return nil, err
			}
		}
		return func(context.Context) error {
			var errs []error
			for _, p := range pids {
				if err := syscall.Kill(p, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
					errs = append(errs, err)
				}
			}
			return errors.Join(errs...)
		}, nil
	case FaultBadArtifact:
		u := c.current()
		if u == nil {
			return nil, errors.New("no upgrade")
		}
		var rel api.Release
		if _, err := c.client.Do(ctx, http.MethodGet, "/v1/releases/"+u.To, nil, &rel); err != nil {
			return nil, err
		}
		art := rel.Components.Kubelet
		if r.Component == "containerd" {
			art = rel.Components.Containerd
		}
		rest, ok := strings.CutPrefix(art.URL, "/artifacts/")
		if !ok {
			return nil, fmt.Errorf("artifact %s is not served by the members", art.URL)
		}
		path := filepath.Join(e.cfg.WorkDir, "artifacts", filepath.FromSlash(rest))
		setTarget(art.URL)
		if err := c.swap.corrupt(path); err != nil {
			return nil, err
		}
		return func(context.Context) error { return c.swap.restore() }, nil
	}
	return nil, fmt.Errorf("unknown fault %s", r.Kind)
}

// timeNewLeader polls the members other than old, the leader a fault
// just struck, until one says it leads, and records when.
func (c *Chaos) timeNewLeader(ctx context.Context, r *FaultRecord, old *Member) {
	defer c.faults.Done()
	deadline := time.Now().Add(time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		for _, m := range c.env.Members {
			if m == old || !m.Running() {
				continue
			}
			var list []api.Member
			mctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := c.memberClient(m).Do(mctx, http.MethodGet, "/v1/members", nil, &list)
			cancel()
			if err != nil {
				continue
			}
			for _, x := range list {
				if x.ID == m.ID && x.Leader {
					c.mu.Lock()
					r.NewLeader = time.Since(r.at)
					c.mu.Unlock()
					return
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Chaos) setFrozen(m *Member, v bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frozen[m] = v
}

func (c *Chaos) current() *api.Upgrade {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.u
}

// member finds the leader, or the pick-th follower (by ID), among the
// members that run and are not frozen.
func (c *Chaos) member(ctx context.Context, leader bool, pick int) (*Member, error) {
	var lead *Member
	var followers []*Member
	err := poll(ctx, 30*time.Second, func() (bool, error) {
		lead, followers = nil, nil
		var id string
		for _, m := range c.env.Members {
			c.mu.Lock()
			frozen := c.frozen[m]
			c.mu.Unlock()
			if frozen || !m.Running() {
				continue
			}
			if id == "" {
				id = c.leaderSeenBy(ctx, m)
			}
		}
		for _, m := range c.env.Members {
			if !m.Running() {
				continue
			}
			if m.ID == id {
				lead = m
			} else {
				followers = append(followers, m)
			}
		}
		return lead != nil && len(followers) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no leader and follower to act on: %w", err)
	}
	if leader {
		return lead, nil
	}
	sort.Slice(followers, func(i, j int) bool { return followers[i].ID < followers[j].ID })
	return followers[pick%len(followers)], nil
}

// leaderSeenBy asks member m who leads ("" when it does not answer).
func (c *Chaos) leaderSeenBy(ctx context.Context, m *Member) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var list []api.Member
	if _, err := c.memberClient(m).Do(ctx, http.MethodGet, "/v1/members", nil, &list); err != nil {
		return ""
	}
	for _, x := range list {
		if x.Leader {
			return x.ID
		}
	}
	return ""
}

// sample looks at the versions the cluster runs every 2 s.
func (c *Chaos) sample(ctx context.Context) {
	defer c.loops.Done()
	kc, err := c.env.Lab.Kube()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		s := VersionSample{At: time.Now(), Kubelets: map[string]string{}, ControlPlane: map[string]string{}}
		if err != nil {
			s.Err = err.Error()
		} else if err := func() error {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			nodes, err := kc.ListNodes(sctx)
			if err != nil {
				return err
			}
			pods, err := kc.ListPods(sctx, "kube-system", "")
			if err != nil {
				return err
			}
			for _, n := range nodes {
				s.Kubelets[n.Name] = strings.TrimPrefix(n.KubeletVersion, "v")
			}
			for _, p := range pods {
				if !p.Mirror {
					continue
				}
				for _, ct := range p.Containers {
					if slices.Contains(lab.ControlPlaneComponents, ct.Name) {
						s.ControlPlane[ct.Name+"/"+p.NodeName] = imageVersion(ct.Image)
					}
				}
			}
			return nil
		}(); err != nil {
			s.Err = err.Error()
		}
		c.mu.Lock()
		c.samples = append(c.samples, s)
		c.mu.Unlock()
		select {
		case <-c.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// WaitEnd waits until the followed upgrade is no longer in progress, or
// until deadline passes; it returns the upgrade as last seen and whether
// the deadline passed.
func (c *Chaos) WaitEnd(ctx context.Context, deadline time.Time) (*api.Upgrade, bool) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if u := c.current(); u != nil && !u.InProgress {
			return u, false
		}
		if time.Now().After(deadline) {
			return c.current(), true
		}
		select {
		case <-ctx.Done():
			return c.current(), true
		case <-t.C:
		}
	}
}

// readHostFiles reads a lab host's binaries and manifests from outside it.
func readHostFiles(l *lab.Lab, host string) (HostFiles, error) {
	f := HostFiles{Host: host, Manifests: map[string][]byte{}}
	h, err := l.Host(host)
	if err != nil {
		return f, err
	}
	root := h.Root()
	sum := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return ""
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}
	f.KubeletSHA256 = sum("/usr/bin/kubelet")
	f.ContainerdSHA = sum("/usr/bin/containerd")
	for _, dir := range []string{"/usr/bin"} {
		ents, _ := os.ReadDir(filepath.Join(root, dir))
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".molt-new") {
				f.Leftovers = append(f.Leftovers, filepath.Join(dir, e.Name()))
			}
		}
	}
	mdir := filepath.Join(root, "/etc/kubernetes/manifests")
	ents, err := os.ReadDir(mdir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return f, err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if strings.HasPrefix(e.Name(), ".") {
			// The agent writes a manifest through a temporary file named
			// ".<name>.molt-tmp-*" (agent/fsutil.go); the lab's ".keep"
			// holds the directory in the rootfs.
			if strings.Contains(e.Name(), ".molt-tmp-") {
				f.Leftovers = append(f.Leftovers, "/etc/kubernetes/manifests/"+e.Name())
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(mdir, e.Name()))
		if err != nil {
			return f, err
		}
		f.Manifests[e.Name()] = b
	}
	return f, nil
}

// manifestImages lists the images a host's manifests name.
func manifestImages(f HostFiles) []string {
	var out []string
	for _, b := range f.Manifests {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "image:"); ok {
				out = append(out, strings.Trim(strings.TrimSpace(v), `"'`))
			}
		}
	}
	return out
}

// CheckResult is one invariant's verdict.
type CheckResult struct {
	Name       string
	Violations []string
	Detail     string
}

// ChaosReport is a run's outcome: its faults, its ending, every check.
type ChaosReport struct {
	Seed      uint64
	Profile   string
	Upgrade   *api.Upgrade
	Ending    Ending
	EndDetail string
	// Explained is false for a halt no injected halting fault accounts
	// for (a finding, listed in the docs with its seed).
	Explained bool
	Faults    []FaultRecord
	Checks    []CheckResult
	Probes    []lab.ProbeReport
	Bound     *BoundReport
	Notes     []string
}

// Violations lists every check's violations.
func (r *ChaosReport) Violations() []string {
	var v []string
	for _, c := range r.Checks {
		v = append(v, c.Violations...)
	}
	return v
}

// Finish stops the schedule, heals every fault still in place, waits
// until the coordinator and the agents are back, and checks the
// invariants. deadlinePassed says the run gave up waiting for the
// upgrade to end.
func (c *Chaos) Finish(ctx context.Context, deadlinePassed bool) *ChaosReport {
	c.halt()
	e := c.env
	rep := &ChaosReport{Seed: c.cfg.Seed, Profile: c.cfg.Profile.Name, Explained: true}
	add := func(name, detail string, v []string) {
		rep.Checks = append(rep.Checks, CheckResult{Name: name, Detail: detail, Violations: v})
	}
	// Recovered: every member runs again, one leads, every agent reports.
	var rv []string
	for _, m := range e.Members {
		if !m.Running() {
			rv = append(rv, "recovered: member "+m.ID+" is not running")
		}
	}
	if err := e.waitMembers(ctx, len(e.Members)); err != nil {
		rv = append(rv, "recovered: no leader over all members: "+err.Error())
	}
	if err := e.WaitAgents(ctx, 3*time.Minute); err != nil {
		rv = append(rv, "recovered: "+err.Error())
	}
	add("recovered", "members up, a leader, every agent healthy", rv)

	u, err := c.upgrade(ctx)
	if err != nil || u.ID == c.prevID {
		u = c.current()
	}
	rep.Upgrade = u
	cl, _ := e.Cluster(ctx)
	ending, detail, ev := checkEnding(u, cl.Status.Version, deadlinePassed)
	rep.Ending, rep.EndDetail = ending, detail
	add("ending", detail, ev)
	c.mu.Lock()
	for _, r := range c.records {
		rep.Faults = append(rep.Faults, *r)
	}
	transitions := slices.Clone(c.transitions)
	samples := slices.Clone(c.samples)
	starts := c.starts
	c.mu.Unlock()
	if ending == EndHalted {
		rep.Explained = haltExplained(u, rep.Faults)
	}
	if u == nil {
		return rep
	}
	from, to := u.From, u.To

	add("order", "SPEC §4 from the recorded steps", checkOrder(u))

	// The agents' journals.
	var jv []string
	ops := map[string]OpTimes{}
	total := 0
	for _, h := range e.Lab.Config().Topology.Hosts {
		hh, err := e.Lab.Host(h.Name)
		if err != nil {
			jv = append(jv, "ops-once: "+err.Error())
			continue
		}
		b, err := os.ReadFile(filepath.Join(hh.Root(), "/var/lib/molt-agent/journal.jsonl"))
		if err != nil {
			jv = append(jv, fmt.Sprintf("ops-once: %s: %v", h.Name, err))
			continue
		}
		sum, v := checkJournal(h.Name, b)
		jv = append(jv, v...)
		total += sum.Operations
		for id, t := range sum.Ops {
			ops[id] = t
		}
	}
	add("ops-once", fmt.Sprintf("%d operations in %d journals", total, len(e.Lab.Config().Topology.Hosts)), jv)
	setNext(rep.Faults, transitions, ops)

	// The hosts' binaries and manifests.
	var relTo api.Release
	_, rerr := c.client.Do(ctx, http.MethodGet, "/v1/releases/"+to, nil, &relTo)
	var tv []string
	if rerr != nil {
		tv = append(tv, "torn: release "+to+": "+rerr.Error())
	}
	manifests := 0
	for _, h := range e.Lab.Config().Topology.Hosts {
		was := c.before[h.Name]
		now, err := readHostFiles(e.Lab, h.Name)
		if err != nil {
			tv = append(tv, "torn: "+err.Error())
			continue
		}
		images := map[string]bool{}
		for _, im := range manifestImages(was) {
			images[im] = true
		}
		for _, im := range relTo.Components.StaticPods {
			images[im] = true
		}
		tv = append(tv, checkHostFiles(now, []string{was.KubeletSHA256, relTo.Components.Kubelet.SHA256},
			[]string{was.ContainerdSHA, relTo.Components.Containerd.SHA256}, images)...)
		manifests += len(now.Manifests)
		for _, l := range now.Leftovers {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %s left (a write that did not finish; nothing reads it)", h.Name, l))
		}
		if ending == EndCompleted {
			if now.KubeletSHA256 != relTo.Components.Kubelet.SHA256 {
				tv = append(tv, fmt.Sprintf("torn: %s: upgrade done but its kubelet is not %s's", h.Name, to))
			}
		}
	}
	add("no-torn-files", fmt.Sprintf("kubelet, containerd and %d manifests on %d hosts", manifests, len(e.Lab.Config().Topology.Hosts)), tv)

	// Version rules, sampled while the upgrade ran.
	roles := map[string]api.Role{}
	for i := range u.Nodes {
		if p, ok := u.Pool(u.Nodes[i].Pool); ok {
			roles[u.Nodes[i].Node] = p.Role
		}
	}
	checked, vv := checkVersionSamples(samples, from, to, roles)
	skipped := len(samples) - checked
	detail = fmt.Sprintf("%d samples every 2 s, %d skipped (API unreachable)", checked, skipped)
	if checked == 0 {
		vv = append(vv, "version-rules: no sample could be taken")
	}
	if e.prom != nil {
		secs := int(time.Since(c.began).Seconds()) + 10
		got, err := e.Query(ctx, fmt.Sprintf(`max_over_time(molt_cluster_version_skew_violation{cluster=%q}[%ds])`, ClusterName, secs))
		switch {
		case err != nil:
			vv = append(vv, "version-rules: prometheus: "+err.Error())
		case len(got) == 0:
			vv = append(vv, "version-rules: molt_cluster_version_skew_violation was never scraped")
		default:
			for k, val := range got {
				if val != "0" {
					vv = append(vv, fmt.Sprintf("version-rules: molt_cluster_version_skew_violation%s reached %s", k, val))
				}
			}
			detail += "; molt_cluster_version_skew_violation stayed 0"
		}
	}
	add("version-rules", detail, vv)

	// Every member's replica of the upgrade is the same.
	add("replicas-agree", fmt.Sprintf("upgrade record on %d members", len(e.Members)), c.replicasAgree(ctx, u.ID))

	if ending == EndCompleted {
		add("cluster-at-target", "every Node Ready at "+to+", control plane on "+to, c.clusterAt(ctx, to))
		if b, err := LowerBound(u, starts, ops); err == nil {
			rep.Bound = &b
		} else {
			rep.Notes = append(rep.Notes, err.Error())
		}
	}
	return rep
}

// halt stops following the upgrade and heals every fault in place.
func (c *Chaos) halt() {
	c.halted.Do(func() {
		close(c.stop)
		c.loops.Wait()
		close(c.healNow)
		c.faults.Wait()
	})
}

// Close heals what is still in place (when Finish was not reached) and
// removes the members' cgroups once the members stopped.
func (c *Chaos) Close() {
	c.halt()
	c.cg.remove(c.env.Members)
}

// setNext measures, for each fault of the leader that fired, the time to
// the next transition: a step or node step the upgrade record shows
// starting or ending, or an operation an agent's journal shows starting.
// The journals add what the record no longer shows: it is read four
// times a second at every member (sweep), yet a node's step start is
// overwritten by the next one, so a step shorter than a read's interval
// can go unseen.
//
// The new leader is found by polling, so it may have led, and acted, a
// little before the poll saw it. A transition the record shows after the
// fault and before the poll saw the new leader is the new leader's: a
// leader frozen, killed or cut off commits nothing, and the record's times
// are the committing leader's. The fault then held nothing past the
// election.
func setNext(faults []FaultRecord, transitions []time.Time, ops map[string]OpTimes) {
	ts := slices.Clone(transitions)
	for _, o := range ops {
		if !o.Started.IsZero() {
			ts = append(ts, o.Started)
		}
	}
	for i := range faults {
		r := &faults[i]
		if !r.Fired || !r.Fault.ofLeader() {
			continue
		}
		r.Next = nextAfter(ts, r.at)
		// Held: from the new leader to the next transition, or, when an
		// operation in flight at the fault ended in between, from the
		// first such end (its node's next step was due then).
		led := r.at.Add(r.NewLeader)
		if first := nextAfter(transitions, r.at); first > 0 && first <= r.NewLeader {
			r.Held = 0
			continue
		}
		d := nextAfter(ts, led)
		if d == 0 {
			continue
		}
		next, from := led.Add(d), led
		for _, o := range ops {
			if !o.Started.IsZero() && o.Started.Before(r.at) && o.Finished.After(led) && o.Finished.Before(next) &&
				(from.Equal(led) || o.Finished.Before(from)) {
				from = o.Finished
			}
		}
		r.Held = next.Sub(from)
	}
}

// nextAfter is the first transition after t (0: none).
func nextAfter(ts []time.Time, t time.Time) time.Duration {
	var best time.Time
	for _, x := range ts {
		if x.After(t) && (best.IsZero() || x.Before(best)) {
			best = x
		}
	}
	if best.IsZero() {
		return 0
	}
	return best.Sub(t)
}

// haltExplained reports whether a halt comes from an injected fault that
// must halt it: a wrong checksum that fired and that a node failed on.
func haltExplained(u *api.Upgrade, faults []FaultRecord) bool {
	fired := false
	for _, f := range faults {
		if f.Kind == FaultBadArtifact && f.Fired && f.Err == "" {
			fired = true
		}
	}
	if !fired || u == nil {
		return false
	}
	if strings.Contains(u.Reason, "checksum mismatch") {
		return true
	}
	for _, n := range u.Nodes {
		if strings.Contains(n.Error, "checksum mismatch") {
			return true
		}
	}
	return false
}

// replicasAgree reads the upgrade from each member, at an index at least
// the leader's, and compares them.
func (c *Chaos) replicasAgree(ctx context.Context, id string) []string {
	var v []string
	var idx uint64
	bodies := map[string]string{}
	get := func(m *Member, minIndex uint64) (string, uint64, error) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, m.URL()+"/v1/clusters/"+ClusterName+"/upgrade", nil)
		req.Header.Set("Authorization", "Bearer "+c.env.adminToken)
		if minIndex > 0 {
			req.Header.Set(api.MinIndexHeader, strconv.FormatUint(minIndex, 10))
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return "", 0, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return "", 0, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
		}
		n, _ := strconv.ParseUint(resp.Header.Get(api.IndexHeader), 10, 64)
		var u api.Upgrade
		if err := json.Unmarshal(b, &u); err != nil {
			return "", 0, err
		}
		if u.ID != id {
			return "", n, fmt.Errorf("shows upgrade %s, not %s", u.ID, id)
		}
		norm, _ := json.Marshal(u)
		return string(norm), n, nil
	}
	for _, m := range c.env.Members {
		if _, n, err := get(m, 0); err == nil && n > idx {
			idx = n
		}
	}
	for _, m := range c.env.Members {
		var body string
		err := poll(ctx, time.Minute, func() (bool, error) {
			b, _, err := get(m, idx)
			body = b
			return err == nil, nil
		})
		if err != nil {
			v = append(v, fmt.Sprintf("replicas-agree: member %s did not answer at index %d", m.ID, idx))
			continue
		}
		bodies[m.ID] = body
	}
	var ref, refID string
	for _, m := range c.env.Members {
		b, ok := bodies[m.ID]
		if !ok {
			continue
		}
		if refID == "" {
			ref, refID = b, m.ID
			continue
		}
		if b != ref {
			v = append(v, fmt.Sprintf("replicas-agree: member %s's upgrade record differs from %s's at index ≥ %d", m.ID, refID, idx))
		}
	}
	return v
}

// clusterAt checks the cluster after a completed upgrade: every Node
// Ready, schedulable, its kubelet at v; every control-plane mirror pod on
// v's images.
func (c *Chaos) clusterAt(ctx context.Context, v string) []string {
	var out []string
	nodes, err := c.env.Lab.Nodes(ctx)
	if err != nil {
		return []string{"cluster-at-target: " + err.Error()}
	}
	for _, n := range nodes {
		if !n.Ready || n.Unschedulable || n.KubeletVersion != "v"+v {
			out = append(out, fmt.Sprintf("cluster-at-target: node %s ready=%v unschedulable=%v kubelet %s", n.Name, n.Ready, n.Unschedulable, n.KubeletVersion))
		}
	}
	images, err := c.env.Lab.StaticPodImages(ctx)
	if err != nil {
		return append(out, "cluster-at-target: "+err.Error())
	}
	for pod, image := range images {
		for _, comp := range lab.ControlPlaneComponents {
			if strings.HasPrefix(pod, comp+"-") && image != lab.ComponentImage(comp, v) {
				out = append(out, fmt.Sprintf("cluster-at-target: %s runs %s", pod, image))
			}
		}
		if strings.HasPrefix(pod, "etcd-") && image != lab.EtcdImage(v) {
			out = append(out, fmt.Sprintf("cluster-at-target: %s runs %s, want %s", pod, image, lab.EtcdImage(v)))
		}
	}
	return out
}
