//go:build lab

package lab

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestInstanceNetwork attaches two instances to a lab network of one
// host and detaches one: each instance gets its namespace, a veth on the
// bridge named after its address and pod routes to every other host, and
// every other namespace routes to its pods; a detached instance leaves no
// namespace, veth or route behind, and its address can be attached again
// at once, even after its namespace was deleted without detach.
func TestInstanceNetwork(t *testing.T) {
	requireLabTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := New(Config{StateDir: filepath.Join(t.TempDir(), "state"), Prefix: "mlabn-",
		Topology: Topology{Name: "net", Hosts: []HostSpec{{Name: "cp-1", Role: RoleControlPlane, IP: "10.77.0.11"}}}})
	require.NoError(t, err)
	require.NoError(t, l.net.Up(ctx))
	t.Cleanup(func() {
		require.NoError(t, l.Down(context.Background()))
		out, err := exec.Command("ip", "netns", "list").CombinedOutput()
		require.NoError(t, err)
		require.NotContains(t, string(out), "mlabn-")
	})
	m := &labMachines{l: l, attached: map[string]HostSpec{}}
	a := HostSpec{Name: "mig-a-1", Role: RoleWorker, IP: "10.77.0.100"}
	b := HostSpec{Name: "mig-b-1", Role: RoleWorker, IP: "10.77.0.101"}
	require.NoError(t, m.attach(ctx, a))
	require.NoError(t, m.attach(ctx, b))

	routes := func(ns string) string {
		out, err := exec.CommandContext(ctx, "ip", "-n", ns, "route", "show").CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	require.Contains(t, routes(l.net.LabNS()), "10.244.100.0/24 via 10.77.0.100")
	require.Contains(t, routes(l.net.LabNS()), "10.244.101.0/24 via 10.77.0.101")
	require.Contains(t, routes(l.net.HostNS("cp-1")), "10.244.100.0/24 via 10.77.0.100")
	require.Contains(t, routes(l.net.HostNS("cp-1")), "10.244.101.0/24 via 10.77.0.101")
	require.Contains(t, routes(l.net.HostNS(a.Name)), "10.244.11.0/24 via 10.77.0.11")
	require.Contains(t, routes(l.net.HostNS(a.Name)), "10.244.101.0/24 via 10.77.0.101", "a was attached first; b's route was added to it")
	require.Contains(t, routes(l.net.HostNS(b.Name)), "10.244.100.0/24 via 10.77.0.100")
	require.Contains(t, routes(l.net.HostNS(b.Name)), "default via 10.77.0.1")
	links, err := exec.CommandContext(ctx, "ip", "-n", l.net.LabNS(), "-o", "link").CombinedOutput()
	require.NoError(t, err)
	require.Contains(t, string(links), "vi-100@")
	require.Contains(t, string(links), "master br0")
	// The instance reaches the host across the bridge, and the host it.
	for _, c := range []struct{ from, to, addr string }{{a.Name, "cp-1", "10.77.0.11:0"}, {"cp-1", b.Name, "10.77.0.101:0"}} {
		ln, err := ListenInNamespace(nsPath(l.net.HostNS(c.to)), "tcp", c.addr)
		require.NoError(t, err)
		go func() {
			if conn, err := ln.Accept(); err == nil {
				_ = conn.Close()
			}
		}()
		conn, err := DialInNamespace(ctx, nsPath(l.net.HostNS(c.from)), "tcp", ln.Addr().String())
		require.NoError(t, err, "%s → %s", c.from, c.to)
		require.NoError(t, conn.Close())
		require.NoError(t, ln.Close())
	}

	require.NoError(t, m.detach(ctx, a))
	require.NoFileExists(t, nsPath(l.net.HostNS(a.Name)))
	require.NotContains(t, routes(l.net.LabNS()), "10.244.100.0/24")
	require.NotContains(t, routes(l.net.HostNS("cp-1")), "10.244.100.0/24")
	require.NotContains(t, routes(l.net.HostNS(b.Name)), "10.244.100.0/24")
	links, err = exec.CommandContext(ctx, "ip", "-n", l.net.LabNS(), "-o", "link").CombinedOutput()
	require.NoError(t, err)
	require.NotContains(t, string(links), "vi-100@")
	require.NoError(t, m.detach(ctx, a), "detaching again changes nothing")

	// The address is free again at once: a new instance gets vi-100. Its
	// namespace then goes without detach (as by hand), leaving the kernel
	// to remove the veth some time later; attaching at that address must
	// still not find the name taken.
	c := HostSpec{Name: "mig-c-1", Role: RoleWorker, IP: "10.77.0.100"}
	require.NoError(t, m.attach(ctx, c))
	out, err := exec.CommandContext(ctx, "ip", "netns", "del", l.net.HostNS(c.Name)).CombinedOutput()
	require.NoError(t, err, string(out))
	require.NoError(t, m.attach(ctx, c))
	links, err = exec.CommandContext(ctx, "ip", "-n", l.net.LabNS(), "-o", "link").CombinedOutput()
	require.NoError(t, err)
	require.Contains(t, string(links), "vi-100@")
	require.NoError(t, m.detach(ctx, c))
	// Down removes b's namespace though no topology names it.
}
