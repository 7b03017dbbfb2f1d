package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// bridgeName is the lab bridge inside the lab namespace. Nothing of the lab
// network exists in the machine's own namespace: the bridge, every veth end
// and every 10.77/10.244 address live in namespaces the lab creates.
const bridgeName = "br0"

// Network is the lab's layer-2 network: one namespace holding a bridge
// (10.77.0.1/24), and one namespace per host joined to it by a veth pair
// whose host end is eth0. Each host routes the other hosts' pod CIDRs to
// them, so pods talk across hosts without an overlay.
type Network struct {
	// Prefix starts every namespace name: Prefix+"lab" is the bridge's,
	// Prefix+host the hosts'.
	Prefix string
	// Hosts are joined to the bridge.
	Hosts []HostSpec
}

// LabNS is the name of the bridge's namespace.
func (n Network) LabNS() string { return n.Prefix + "lab" }

// HostNS is the name of a host's namespace.
func (n Network) HostNS(host string) string { return n.Prefix + host }

// Namespaces lists every namespace the network owns, bridge's first.
func (n Network) Namespaces() []string {
	out := []string{n.LabNS()}
	for _, h := range n.Hosts {
		out = append(out, n.HostNS(h.Name))
	}
	return out
}

// Up creates whatever of the network is missing. It is idempotent: a
// namespace that exists is assumed configured (Down then Up repairs one
// that is not).
func (n Network) Up(ctx context.Context) error {
	lab := n.LabNS()
	labExisted := nsExists(lab)
	if !labExisted {
		steps := [][]string{
			{"netns", "add", lab},
			{"-n", lab, "link", "set", "lo", "up"},
			{"-n", lab, "link", "add", bridgeName, "type", "bridge"},
			{"-n", lab, "addr", "add", GatewayIP + "/24", "dev", bridgeName},
			{"-n", lab, "link", "set", bridgeName, "up"},
		}
		for _, h := range n.Hosts {
			steps = append(steps, []string{"-n", lab, "route", "add", PodCIDR(h), "via", h.IP})
		}
		if err := ipAll(ctx, steps); err != nil {
			return err
		}
	}
	for _, h := range n.Hosts {
		ns := n.HostNS(h.Name)
		if nsExists(ns) {
			continue
		}
		veth := "vh-" + h.Name
		if len(veth) > 15 {
			return fmt.Errorf("%w: host name %q too long for an interface name", ErrNetwork, h.Name)
		}
		if labExisted {
			// The host's namespace was deleted without the bridge's (by
			// hand, or by a Down that failed half way): its veth may still
			// be on the bridge, and would keep the name taken (delLink).
			if err := delLink(ctx, lab, veth); err != nil {
				return err
			}
		}
		steps := [][]string{
			{"netns", "add", ns},
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", lab, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"-n", lab, "link", "set", veth, "master", bridgeName},
			{"-n", lab, "link", "set", veth, "up"},
			{"-n", ns, "addr", "add", h.IP + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
			// The default route ends in the lab namespace, which routes
			// nowhere else: nothing can leave the lab.
			{"-n", ns, "route", "add", "default", "via", GatewayIP},
		}
		for _, o := range n.Hosts {
			if o.Name != h.Name {
				steps = append(steps, []string{"-n", ns, "route", "add", PodCIDR(o), "via", o.IP})
			}
		}
		if err := ipAll(ctx, steps); err != nil {
			return err
		}
		// Hosts forward between eth0 and their pod bridge.
		if err := run(ctx, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
			return fmt.Errorf("%w: %v", ErrNetwork, err)
		}
	}
	return nil
}

// Down deletes every namespace of the network, the bridge's first. The
// kernel deletes the bridge and veths inside them when it tears the
// namespaces down, which may be after Down returns; nothing waits for
// that, as those links are in namespaces no one can enter any more (none
// was ever in the machine's own), and an Up makes new ones. Missing
// namespaces are fine.
func (n Network) Down(ctx context.Context) error {
	var errs []string
	for _, ns := range n.Namespaces() {
		if !nsExists(ns) {
			continue
		}
		if err := run(ctx, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrNetwork, strings.Join(errs, "; "))
	}
	return nil
}

// DialContext dials addr from inside the lab namespace, so code on this
// machine (tests, `molt-lab status`) reaches the lab's 10.77.0.0/24 and pod
// addresses without any route in the machine's own namespace. Use it as
// rest.Config.Dial or http.Transport.DialContext.
func (n Network) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return DialInNamespace(ctx, nsPath(n.LabNS()), network, addr)
}

// DialInNamespace dials from the network namespace at nsPath. A socket
// stays in the namespace it was created in, so only the dial needs a thread
// switched into it (InNamespace).
func DialInNamespace(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := InNamespace(nsPath, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// ListenInNamespace listens on addr from the network namespace at nsPath:
// the socket stays there and serves connections made inside it, so a
// server of this process is reachable only from there (the lab's instance
// groups listen on the lab namespace's loopback, where the members run).
func ListenInNamespace(nsPath, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := InNamespace(nsPath, func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// InNamespace runs fn on an OS thread switched into the network namespace
// at nsPath, and waits for it. The thread is switched back, or retired if
// it cannot be, so no other goroutine ever runs in the namespace.
func InNamespace(nsPath string, fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("%w: %v", ErrNetwork, err)
			return
		}
		defer orig.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("%w: %v", ErrNetwork, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("%w: setns %s: %v", ErrNetwork, nsPath, err)
			return
		}
		err = fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else: the goroutine exits locked and the runtime discards the thread.
		ch <- err
	}()
	return <-ch
}

// namespacesWithPrefix lists the network namespaces whose name starts
// with prefix.
func namespacesWithPrefix(prefix string) []string {
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func nsPath(name string) string { return filepath.Join("/run/netns", name) }

func nsExists(name string) bool { return exists(nsPath(name)) }

// delLink deletes the link name in namespace ns, and returns once it is
// gone. A link that is not there counts as deleted, and so does a
// namespace that is not there (the link went with it).
//
// Deleting a namespace does not do this for the veths in it. `ip netns
// del` only drops the namespace's name; the kernel tears the namespace
// down later, on a workqueue, and only then deletes its veths and their
// peers in other namespaces. Until then the peer stays on the lab bridge
// and its name is taken: a listing of the bridge still shows it, and
// making a veth of that name fails with "File exists". Deleting one end
// of a veth removes both ends before `ip link del` returns, so deleting
// the bridge end before the namespace leaves nothing to wait for.
func delLink(ctx context.Context, ns, name string) error {
	if !nsExists(ns) {
		return nil
	}
	err := run(ctx, "ip", "-n", ns, "link", "del", name)
	if err == nil {
		return nil
	}
	// Either it was never there or the kernel's teardown of its peer's
	// namespace removed it first; gone is gone. Asking the kernel spares
	// parsing ip's message.
	if !nsExists(ns) {
		return nil
	}
	ok, lerr := linkExists(ns, name)
	if lerr == nil && !ok {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrNetwork, errors.Join(err, lerr))
}

// linkExists reports whether namespace ns has a link called name.
func linkExists(ns, name string) (bool, error) {
	var found bool
	err := InNamespace(nsPath(ns), func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return fmt.Errorf("%w: links of %s: %v", ErrNetwork, ns, err)
		}
		for _, i := range ifs {
			found = found || i.Name == name
		}
		return nil
	})
	return found, err
}

func ipAll(ctx context.Context, steps [][]string) error {
	for _, s := range steps {
		if err := run(ctx, "ip", s...); err != nil {
			return fmt.Errorf("%w: %v", ErrNetwork, err)
		}
	}
	return nil
}

// run executes a command on this machine, returning its output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
