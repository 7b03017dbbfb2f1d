package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/moltproject/molt/cloud"
)

// The real machines behind the lab's instance groups: each instance is a
// host like the topology's workers — same rootfs, same preparation
// (prepareHost), a kubelet and containerd of the instance's release — in a
// network namespace of its own on the lab bridge, at an address of
// 10.77.0.100-250, with pod routes to and from every other host.

// instanceStopGrace is how long an instance's host may take to power off
// before it is killed.
const instanceStopGrace = 3 * time.Second

// Groups returns the lab's instance groups, their book in
// <state>/groups.json. Instances boot as workers of the lab's cluster, so
// the lab must be up; Close stops the workers (hosts keep running, and a
// later Groups picks the book up again). Down removes every instance's
// host.
func (l *Lab) Groups(cfg GroupsConfig) (*Groups, error) {
	if cfg.Parallel < 1 {
		cfg.Parallel = l.cfg.Parallel
	}
	var reserved []string
	for _, h := range l.cfg.Topology.Hosts {
		reserved = append(reserved, h.Name)
	}
	m := &labMachines{l: l, after: cfg.AfterInstance, attached: map[string]HostSpec{}}
	return newGroups(cfg, m, groupsBookPath(l.cfg.StateDir), reserved, l.cfg.Log.With("part", "instance-groups"))
}

// groupsBookPath is where the instance groups' book is kept.
func groupsBookPath(stateDir string) string { return filepath.Join(stateDir, "groups.json") }

// labMachines boots instances as lab hosts.
type labMachines struct {
	l     *Lab
	after func(ctx context.Context, h *Host, spec HostSpec) error

	pkiMu sync.Mutex
	// netMu orders the network changes: each instance's routes are made
	// against the hosts attached before it, and theirs to it.
	netMu    sync.Mutex
	attached map[string]HostSpec
}

func (r *labMachines) spec(m machine) HostSpec {
	return HostSpec{Name: m.Name, Role: RoleWorker, IP: m.IP, Zone: m.Zone, ProviderID: m.providerID()}
}

// checkRelease makes sure of the release's inputs (builds, images): a
// release the lab has no build of is not a template it can make.
func (r *labMachines) checkRelease(ctx context.Context, release string) error {
	if _, err := r.l.EnsureInputs(ctx, release); err != nil {
		return fmt.Errorf("lab: release %s: the lab cannot boot hosts at it: %v: %w", release, err, cloud.ErrInvalid)
	}
	return nil
}

func (r *labMachines) start(ctx context.Context, m machine) (err error) {
	if m.Release == "" {
		return fmt.Errorf("%w: instance %s has no release", ErrHost, m.Name)
	}
	in, err := r.l.EnsureInputs(ctx, m.Release)
	if err != nil {
		return err
	}
	pki, err := r.pki(m.Name)
	if err != nil {
		return err
	}
	spec := r.spec(m)
	defer func() {
		if err != nil {
			// Nothing of a host that did not come up stays behind.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if serr := r.stop(cctx, m, false); serr != nil {
				err = errors.Join(err, serr)
			}
		}
	}()
	if err := r.attach(ctx, spec); err != nil {
		return err
	}
	hin := hostInputs{spec: spec, topo: r.l.cfg.Topology, version: in.Version, k8sBin: in.K8sBin, containerd: builtContainerd(in),
		pki: pki, images: in.Images, consoles: filepath.Join(r.l.cfg.StateDir, "console")}
	t0 := time.Now()
	h, err := bootHost(ctx, in.Rootfs, r.l.net.HostNS(m.Name), hin)
	if err != nil {
		return err
	}
	if err := prepareHost(ctx, h, hin); err != nil {
		return err
	}
	if r.after != nil {
		if err := r.after(ctx, h, spec); err != nil {
			return err
		}
	}
	r.l.cfg.Log.Info("lab instance up", "instance", m.Name, "zone", m.Zone, "group", m.Group, "release", m.Release, "ip", m.IP, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// stop powers the host off, removes its namespace and routes, and, unless
// keepNode, its Node and kubelet credentials.
func (r *labMachines) stop(ctx context.Context, m machine, keepNode bool) error {
	ns := r.l.net.HostNS(m.Name)
	t0 := time.Now()
	if rh, ok := findHost(m.Name, ns); ok {
		// A deleted instance is gone for good: its systemd gets a few
		// seconds to stop its units, then the host is killed.
		if err := stopHost(ctx, rh, instanceStopGrace); err != nil {
			return err
		}
		r.l.cfg.Log.Info("lab instance host stopped", "instance", m.Name, "took", time.Since(t0).Round(time.Millisecond))
	}
	if err := killNamespacePIDs(ctx, []string{ns}); err != nil {
		return err
	}
	if err := r.detach(ctx, r.spec(m)); err != nil {
		return err
	}
	if keepNode {
		return nil
	}
	// The Node goes with the instance, as a cloud's node lifecycle
	// controller removes it. Best effort: the API may be down (a lab on
	// its way down), and molt deletes the Nodes of instances it deletes.
	if kc, err := r.l.Kube(); err == nil {
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		if err := kc.DeleteNode(dctx, m.Name); err != nil {
			r.l.cfg.Log.Warn("lab instance: deleting its Node failed", "instance", m.Name, "err", err)
		}
		cancel()
	}
	r.pkiMu.Lock()
	defer r.pkiMu.Unlock()
	pki := PKI{KubeconfigDir: filepath.Join(r.l.cfg.StateDir, "kubeconfig")}
	if err := os.Remove(pki.KubeletKubeconfig(m.Name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %v", ErrHost, err)
	}
	return nil
}

func (r *labMachines) running(m machine) bool {
	ns := r.l.net.HostNS(m.Name)
	if nsExists(ns) {
		r.netMu.Lock()
		r.attached[m.Name] = r.spec(m)
		r.netMu.Unlock()
	}
	_, ok := findHost(m.Name, ns)
	return ok
}

// pki makes the instance's kubelet kubeconfig (system:node:<name>) under
// the lab's CA; everything else of the PKI exists already.
func (r *labMachines) pki(name string) (*PKI, error) {
	r.pkiMu.Lock()
	defer r.pkiMu.Unlock()
	spec := r.l.pkiSpec()
	spec.Nodes = []string{name}
	return EnsurePKI(r.l.cfg.StateDir, spec)
}

// attach gives the instance its namespace on the lab bridge and the pod
// routes between it and every other host.
func (r *labMachines) attach(ctx context.Context, h HostSpec) error {
	veth, err := instanceVeth(h)
	if err != nil {
		return err
	}
	r.netMu.Lock()
	defer r.netMu.Unlock()
	lab, ns := r.l.net.LabNS(), r.l.net.HostNS(h.Name)
	if nsExists(ns) {
		if err := r.detachLocked(ctx, h); err != nil {
			return err
		}
	} else if err := delLink(ctx, lab, veth); err != nil {
		// A namespace deleted other than by detach (by hand, or by a
		// Down that failed half way) leaves its veth on the bridge for
		// a while: see delLink.
		return err
	}
	steps := [][]string{
		{"netns", "add", ns},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", lab, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", lab, "link", "set", veth, "master", bridgeName},
		{"-n", lab, "link", "set", veth, "up"},
		{"-n", ns, "addr", "add", h.IP + "/24", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "route", "add", "default", "via", GatewayIP},
		{"-n", lab, "route", "replace", PodCIDR(h), "via", h.IP},
	}
	others := r.others(h.Name)
	for _, o := range others {
		steps = append(steps, []string{"-n", ns, "route", "replace", PodCIDR(o), "via", o.IP})
	}
	if err := ipAll(ctx, steps); err != nil {
		return err
	}
	for _, o := range others {
		if ons := r.l.net.HostNS(o.Name); nsExists(ons) {
			if err := run(ctx, "ip", "-n", ons, "route", "replace", PodCIDR(h), "via", h.IP); err != nil {
				return fmt.Errorf("%w: %v", ErrNetwork, err)
			}
		}
	}
	if err := run(ctx, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return fmt.Errorf("%w: %v", ErrNetwork, err)
	}
	r.attached[h.Name] = h
	return nil
}

func (r *labMachines) detach(ctx context.Context, h HostSpec) error {
	r.netMu.Lock()
	defer r.netMu.Unlock()
	return r.detachLocked(ctx, h)
}

// detachLocked deletes the instance's veth, its namespace and the routes
// to its pod CIDR. A veth or route already gone is fine.
func (r *labMachines) detachLocked(ctx context.Context, h HostSpec) error {
	veth, err := instanceVeth(h)
	if err != nil {
		return err
	}
	// The veth explicitly, not with the namespace: the kernel removes a
	// deleted namespace's veths (and so this one's end on the bridge)
	// only some time after `ip netns del` returns (see delLink). Until
	// then the bridge would still list it, and attach's making the veth
	// again would fail.
	if err := delLink(ctx, r.l.net.LabNS(), veth); err != nil {
		return err
	}
	ns := r.l.net.HostNS(h.Name)
	if nsExists(ns) {
		if err := run(ctx, "ip", "netns", "del", ns); err != nil {
			return fmt.Errorf("%w: %v", ErrNetwork, err)
		}
	}
	_ = run(ctx, "ip", "-n", r.l.net.LabNS(), "route", "del", PodCIDR(h), "via", h.IP)
	for _, o := range r.others(h.Name) {
		if ons := r.l.net.HostNS(o.Name); nsExists(ons) {
			_ = run(ctx, "ip", "-n", ons, "route", "del", PodCIDR(h), "via", h.IP)
		}
	}
	delete(r.attached, h.Name)
	return nil
}

// instanceVeth names the bridge end of the instance's veth. Interface
// names are at most 15 bytes: it is named after the instance's address,
// not its (longer) name.
func instanceVeth(h HostSpec) (string, error) {
	octet, err := instanceAddr(h.IP)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("vi-%d", octet), nil
}

// others are the hosts an instance exchanges pod routes with: the
// topology's and the other attached instances.
func (r *labMachines) others(name string) []HostSpec {
	out := append([]HostSpec(nil), r.l.cfg.Topology.Hosts...)
	for n, h := range r.attached {
		if n != name {
			out = append(out, h)
		}
	}
	return out
}
