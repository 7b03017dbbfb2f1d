//go:build lab

package lab

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/cloud/cloudtest"
	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/moltproject/molt/kube"
)

// groupReleases are the releases the instance-group tests use besides the
// lab's own (testVersion): the one they move a group to, and the base
// template's — the other two of the three CI builds.
func groupReleases() (second, base string) {
	var others []string
	for _, v := range []string{"1.34.3", "1.33.13", "1.34.4"} {
		if v != testVersion() {
			others = append(others, v)
		}
	}
	return others[0], others[1]
}

// testInstanceGroups serves the lab's instance groups as the coordinator
// members reach them (HTTP on the lab namespace's loopback), runs the
// cloud contract suite against them with real hosts behind every
// instance, and scales a group 2 → 3 → 2: the new instance is a Node Ready
// at its template's release, with its provider ID and zone label,
// reachable by pods on other hosts; the one removed leaves no host,
// namespace, route or Node behind. TestSmallLabUpServeDown runs it on its
// lab, whose Down then removes everything, instances included.
func testInstanceGroups(t *testing.T, ctx context.Context, l *Lab) {
	second, base := groupReleases()
	for _, v := range []string{second, base} {
		testenv.RequireFile(t, filepath.Join(cachedir.K8sBin(cachedir.Build(), v), "kubelet"), "kubelet ("+cachedir.K8sBuildOf(v).Command()+")")
	}
	svc, err := l.ServeGroups(GroupsConfig{Parallel: 3})
	require.NoError(t, err)
	defer func() { require.NoError(t, svc.Close()) }()
	require.Regexp(t, `^http://127\.0\.0\.1:[0-9]+$`, svc.Endpoint(), "served on the lab namespace's loopback only")

	t.Run("instance groups: contract", func(t *testing.T) {
		t0 := time.Now()
		cloudtest.Run(t, &labHarness{l: l, svc: svc})
		t.Logf("MEASURED contract suite against the lab's real hosts: %s", time.Since(t0).Round(time.Second))
	})
	if t.Failed() {
		return
	}
	t.Run("instance groups: scale 2 → 3 → 2", func(t *testing.T) { testScale(t, ctx, l, svc) })
}

// labHarness runs every case of the contract against the one served lab;
// each case's groups are deleted after it, hosts with them.
type labHarness struct {
	l    *Lab
	svc  *GroupService
	base string
}

func (h *labHarness) New(t *testing.T) cloudtest.Backend {
	ctx := context.Background()
	if h.base == "" {
		// The base is a template of a third release: a template of one
		// of the suite's releases made from it is a new one.
		_, release := groupReleases()
		base, err := h.svc.Groups().EnsureTemplate(ctx, cloud.TemplateSpec{Release: release}, "harness/base")
		require.NoError(t, err)
		h.base = base
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		g := h.svc.Groups()
		groups := map[cloud.GroupRef]bool{}
		for _, in := range g.Instances() {
			groups[groupOfProviderID(t, in.ProviderID)] = true
		}
		// Every group at once: their hosts stop side by side.
		errs := make(chan error, len(groups))
		for ref := range groups {
			go func() { errs <- g.DeleteGroup(cctx, ref, "harness/cleanup") }()
		}
		for range groups {
			require.NoError(t, <-errs)
		}
		left := hostsWithPrefix(h.l.cfg.Prefix)
		require.Len(t, left, len(h.l.cfg.Topology.Hosts), "only the topology's hosts remain: %v", slices.Sorted(maps.Keys(left)))
	})
	return &labBackend{h: h}
}

type labBackend struct{ h *labHarness }

// Provider is a new client through the lab namespace each time, as a new
// leader's member builds one.
func (b *labBackend) Provider(t *testing.T) cloud.Provider {
	p, err := b.h.svc.Client()
	require.NoError(t, err)
	return p
}
func (b *labBackend) Zone() string         { return "zone-a" }
func (b *labBackend) BaseTemplate() string { return b.h.base }
func (b *labBackend) Releases() (first, second string) {
	second, _ = groupReleases()
	return testVersion(), second
}
func (b *labBackend) FinishCreating(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, b.h.svc.Groups().Settle(ctx))
}
func (b *labBackend) SetQuota(_ *testing.T, zone string, n int) { b.h.svc.Groups().SetQuota(zone, n) }
func (b *labBackend) SetStockout(_ *testing.T, zone string, on bool) {
	b.h.svc.Groups().SetStockout(zone, on)
}
func (b *labBackend) TimeoutNext(*testing.T) { b.h.svc.Groups().TimeoutNext() }

func testScale(t *testing.T, ctx context.Context, l *Lab, svc *GroupService) {
	p, err := svc.Client()
	require.NoError(t, err)
	ref := cloud.GroupRef{Zone: "zone-a", Name: "mig-a"}
	second, _ := groupReleases()
	v1, err := p.EnsureTemplate(ctx, cloud.TemplateSpec{Release: testVersion()}, "scale/v1")
	require.NoError(t, err)
	require.NoError(t, p.CreateGroup(ctx, ref, v1, 2, "scale/create"))
	t0 := time.Now()
	nodes := waitInstanceNodes(t, ctx, l, p, ref, 2)
	t.Logf("MEASURED 2 instances created → Nodes Ready: %s", time.Since(t0).Round(100*time.Millisecond))
	for _, n := range nodes {
		require.Equal(t, "v"+testVersion(), n.KubeletVersion, n.Name)
	}

	// The template decides the release of instances created from now on.
	v2, err := p.EnsureTemplate(ctx, cloud.TemplateSpec{Release: second, Base: v1}, "scale/v2")
	require.NoError(t, err)
	require.NoError(t, p.SetTemplate(ctx, ref, v2, "scale/set-template"))
	require.NoError(t, p.Resize(ctx, ref, 3, "scale/3"))
	t0 = time.Now()
	nodes = waitInstanceNodes(t, ctx, l, p, ref, 3)
	took := time.Since(t0)
	newest := nodes[2]
	require.Equal(t, "mig-a-3", newest.Name)
	require.Equal(t, "v"+second, newest.KubeletVersion, "the new Node runs its template's release")
	require.Equal(t, "v"+testVersion(), nodes[0].KubeletVersion, "the running ones keep theirs")
	require.Equal(t, "molt-lab://zone-a/mig-a/mig-a-3", newest.ProviderID)
	require.Equal(t, "zone-a", newest.Labels[ZoneLabel])
	require.Equal(t, string(RoleWorker), newest.Labels[roleLabel])
	t.Logf("MEASURED lab instance create → Node Ready (kubelet v%s): %s", second, took.Round(100*time.Millisecond))

	// A pod on the new host answers a request from the control-plane
	// host: pod routes reach it across the bridge.
	requireNodeEchoAnswers(t, ctx, l, newest.Name)

	podCIDR := PodCIDR(HostSpec{IP: instanceAddress(svc.Groups(), "mig-a-3")})
	routes, err := exec.CommandContext(ctx, "ip", "-n", l.net.HostNS("cp-1"), "route", "show").CombinedOutput()
	require.NoError(t, err, string(routes))
	require.Contains(t, string(routes), podCIDR+" via", "cp-1 routes to the new instance's pods")
	require.NoError(t, p.Resize(ctx, ref, 2, "scale/2"))
	ins, err := p.ListInstances(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, cloud.StatusDeleting, ins[2].Status, "the greatest name goes")
	require.NoError(t, svc.Groups().Settle(ctx))
	ins, err = p.ListInstances(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, []string{"mig-a-1", "mig-a-2"}, []string{ins[0].Name, ins[1].Name})
	require.Len(t, ins, 2)
	_, running := findHost("mig-a-3", l.net.HostNS("mig-a-3"))
	require.False(t, running, "the removed instance's host is stopped")
	require.NoFileExists(t, nsPath(l.net.HostNS("mig-a-3")), "and its namespace gone")
	for _, ns := range []string{l.net.LabNS(), l.net.HostNS("cp-1"), l.net.HostNS("mig-a-1")} {
		out, err := exec.CommandContext(ctx, "ip", "-n", ns, "route", "show").CombinedOutput()
		require.NoError(t, err, string(out))
		require.NotContains(t, string(out), podCIDR, "the route to its pods in %s", ns)
	}
	all, err := l.Nodes(ctx)
	require.NoError(t, err)
	for _, n := range all {
		require.NotEqual(t, "mig-a-3", n.Name, "its Node is deleted")
	}
	require.NoError(t, p.DeleteGroup(ctx, ref, "scale/delete"))
	require.Len(t, hostsWithPrefix(l.cfg.Prefix), len(l.cfg.Topology.Hosts))
}

// waitInstanceNodes waits until the group has n RUNNING instances and
// each is a Ready Node; it returns their Nodes by name.
func waitInstanceNodes(t *testing.T, ctx context.Context, l *Lab, p cloud.Provider, ref cloud.GroupRef, n int) []kube.NodeInfo {
	t.Helper()
	var out []kube.NodeInfo
	err := poll(ctx, 5*time.Minute, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		ins, err := p.ListInstances(ctx, ref)
		if err != nil {
			return false, err.Error(), nil
		}
		nodes, err := l.Nodes(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		out = out[:0]
		for _, in := range ins {
			if in.Status != cloud.StatusRunning {
				return false, fmt.Sprintf("%s %s", in.Name, in.Status), nil
			}
			i := slices.IndexFunc(nodes, func(n kube.NodeInfo) bool { return n.Name == in.Name })
			if i < 0 || !nodes[i].Ready {
				return false, "Node " + in.Name + " not Ready", nil
			}
			out = append(out, nodes[i])
		}
		return len(out) == n, fmt.Sprintf("%d of %d", len(out), n), nil
	})
	require.NoError(t, err)
	return out
}

// requireNodeEchoAnswers asks the sample DaemonSet's pod on node from
// cp-1's namespace.
func requireNodeEchoAnswers(t *testing.T, ctx context.Context, l *Lab, node string) {
	t.Helper()
	kc, err := l.Kube()
	require.NoError(t, err)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return DialInNamespace(ctx, nsPath(l.net.HostNS("cp-1")), network, addr)
		},
	}}
	defer client.CloseIdleConnections()
	err = poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) (bool, string, error) {
		pods, err := kc.ListPods(ctx, DemoNamespace, "app="+DemoDaemonSet)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, p := range pods {
			if p.NodeName != node {
				continue
			}
			if !p.Ready {
				return false, p.Name + " not Ready", nil
			}
			if err := askEcho(ctx, client, p); err != nil {
				return false, err.Error(), nil
			}
			return true, "", nil
		}
		return false, "no " + DemoDaemonSet + " pod on " + node, nil
	})
	require.NoError(t, err)
}

// instanceAddress is an instance's address in the book.
func instanceAddress(g *Groups, name string) string { return g.address(name) }
