//go:build lab

package lab

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/stretchr/testify/require"
)

// TestSmallLabUpServeDown brings up the small topology, checks every Node
// is Ready at the version and a pod on a worker answers a request made
// from the control-plane host, then tears down and checks nothing is left.
// Run: go test -tags lab -run TestSmallLab -v ./lab/ (root; ~1 minute).
// MOLT_LAB_VERSION picks the version (default 1.34.4, the one CI builds).
//
// On that lab it then runs the instance groups' tests (groups_lab_test.go):
// a lab is brought up once for both.
func TestSmallLabUpServeDown(t *testing.T) {
	upServeDown(t, SmallTopology(), testVersion(), testInstanceGroups)
}

// TestFullLabUpServeDown does the same with the full topology (3 etcd
// members behind the LB, 7 hosts; ~2-3 minutes).
func TestFullLabUpServeDown(t *testing.T) { upServeDown(t, FullTopology(), testVersion()) }

// upgradeVersions are the releases upgrade tests walk the lab through
// besides its default (1.34.4): the older minor they start from and the
// patch of the newer minor they go to first, so that a minor upgrade
// (1.33.13 → 1.34.3) and then a patch upgrade (1.34.3 → 1.34.4) can follow.
var upgradeVersions = []string{"1.33.13", "1.34.3"}

// TestSmallLabUpAtUpgradeVersions runs the small-topology checks at each of
// upgradeVersions: kubelets report it, the apiserver reports it and the
// control-plane static pods run its images. It guards what upgrade tests
// will start from and pass through (the lab's flags and kubelet config
// must suit every one, and each release's etcd, EtcdVersionFor).
//
// Like every lab test it fails under CI=true when the binaries are not in
// the cache (scripts/install-deps.sh builds every release of
// cachedir.K8sBuilds).
func TestSmallLabUpAtUpgradeVersions(t *testing.T) {
	requireLabTools(t)
	for _, v := range upgradeVersions {
		t.Run("v"+v, func(t *testing.T) {
			bin := cachedir.K8sBin(cachedir.Build(), v)
			for _, c := range []string{"kubelet", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
				testenv.RequireFile(t, filepath.Join(bin, c), c+" v"+v+" ("+cachedir.K8sBuildOf(v).Command()+")")
			}
			upServeDown(t, SmallTopology(), v)
		})
	}
}

// upServeDown brings the lab up, checks it, runs more (each a subtest)
// and leaves Down to newTestLab's cleanup, which checks nothing is left.
func upServeDown(t *testing.T, topo Topology, version string, more ...func(*testing.T, context.Context, *Lab)) {
	requireLabTools(t)
	l := newTestLabAt(t, topo, version, nil)
	cfg := l.Config()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	t0 := time.Now()
	require.NoError(t, l.Up(ctx))
	t.Logf("up in %s", time.Since(t0).Round(time.Millisecond))

	nodes, err := l.Nodes(ctx)
	require.NoError(t, err)
	require.Len(t, nodes, len(cfg.Topology.Hosts))
	for _, n := range nodes {
		require.True(t, n.Ready, n.Name)
		require.False(t, n.Unschedulable, n.Name)
		require.Equal(t, "v"+cfg.Version, n.KubeletVersion, n.Name)
	}
	kc, err := l.Kube()
	require.NoError(t, err)
	sv, err := kc.ServerVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, "v"+cfg.Version, sv, "apiserver version")

	// Every control-plane host runs the version's component images. The
	// mirror pods are the kubelets' report of what they run; poll because
	// Up waits for Nodes and workloads, not for every mirror pod.
	wantCP := 3 * len(cfg.Topology.WithRole(RoleControlPlane))
	cpImages := map[string]string{} // "pod/container" → image
	require.Eventually(t, func() bool {
		images, err := l.StaticPodImages(ctx)
		if err != nil {
			return false
		}
		clear(cpImages)
		for key, img := range images {
			switch key[strings.LastIndex(key, "/")+1:] {
			case "kube-apiserver", "kube-controller-manager", "kube-scheduler":
				cpImages[key] = img
			}
		}
		return len(cpImages) == wantCP
	}, time.Minute, time.Second, "want %d control-plane mirror pods", wantCP)
	for key, img := range cpImages {
		require.Equal(t, ComponentImage(key[strings.LastIndex(key, "/")+1:], cfg.Version), img, key)
	}

	// The add-ons at the version: kube-proxy Ready on every node, CoreDNS
	// rolled out, each on its image from the lab registry.
	require.NoError(t, l.CheckAddons(ctx, cfg.Version))
	_, running := l.registryPID()
	require.True(t, running, "the lab registry runs")

	// Deployment pods on workers, asked from inside cp-1's network
	// namespace: the requests cross hosts over the lab bridge; then the
	// Service by name, through cluster DNS and kube-proxy.
	require.NoError(t, l.CheckServing(ctx))

	// Logs go apiserver → kubelet: the kubelet's webhook authorizer must
	// accept the apiserver's kubelet-client identity (bindClusterAdmins).
	pods, err := kc.ListPods(ctx, DemoNamespace, "app="+DemoDeploy)
	require.NoError(t, err)
	require.NotEmpty(t, pods)
	_, err = kc.PodLogs(ctx, DemoNamespace, pods[0].Name, "")
	require.NoError(t, err, "kubectl logs through the apiserver")

	kubeconfig, err := l.AdminKubeconfig()
	require.NoError(t, err)
	require.Contains(t, string(kubeconfig), "server: https://"+cfg.Topology.APIEndpoint())

	out, err := l.Exec(ctx, "worker-1", "systemctl", "is-active", "kubelet.service", "containerd.service")
	require.NoError(t, err)
	require.Equal(t, "active\nactive\n", string(out))

	st := l.Status(ctx)
	for _, h := range st.Hosts {
		require.True(t, h.Running && h.NodeReady, h.Name)
	}
	var sb strings.Builder
	st.Print(&sb, l.Network().LabNS())
	t.Log("\n" + sb.String())

	t0 = time.Now()
	require.NoError(t, l.Up(ctx), "a second Up is a no-op")
	t.Logf("second up in %s", time.Since(t0).Round(time.Millisecond))
	for _, f := range more {
		f(t, ctx, l)
	}
}

// requireNothingLeft checks no nspawn process, namespace or state remains.
func requireNothingLeft(t *testing.T, l *Lab) {
	t.Helper()
	for _, h := range l.Config().Topology.Hosts {
		_, ok := findHost(h.Name, l.Network().HostNS(h.Name))
		require.False(t, ok, "host %s still running", h.Name)
	}
	for _, ns := range l.Network().Namespaces() {
		require.NoFileExists(t, nsPath(ns))
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	require.NoError(t, err)
	require.NotContains(t, string(out), l.Config().Prefix)
	links, err := exec.Command("ip", "-o", "link").Output()
	require.NoError(t, err)
	require.NotContains(t, string(links), "vh-")
	require.NotContains(t, string(links), "vi-", "an instance's veth")
	require.Empty(t, hostsWithPrefix(l.Config().Prefix), "a host of the lab, instances included")
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	require.NotContains(t, string(mounts), l.Config().Prefix)
	require.NoDirExists(t, l.Config().StateDir)
	registry := filepath.Join(l.Config().Cache, "lab", "tools", registryTool)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		require.False(t, strings.HasPrefix(string(b), registry+"\x00"), "registry still running: %s", p)
	}
}

func dumpConsoles(t *testing.T, state string) {
	logs, _ := filepath.Glob(filepath.Join(state, "console", "*.log"))
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("console %s:\n%s", filepath.Base(f), b)
	}
}

// tlog sends lab output to t.Log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newTestLab is a lab in a temporary state dir with its own namespace
// prefix; cleanup tears it down and checks nothing is left.
func newTestLab(t *testing.T, topo Topology, tweak func(*Config)) *Lab {
	t.Helper()
	return newTestLabAt(t, topo, testVersion(), tweak)
}

// testVersion is $MOLT_LAB_VERSION, else 1.34.4: the version CI builds.
func testVersion() string {
	if v := os.Getenv("MOLT_LAB_VERSION"); v != "" {
		return v
	}
	return "1.34.4"
}

// newTestLabAt is newTestLab at a given Kubernetes version.
func newTestLabAt(t *testing.T, topo Topology, version string, tweak func(*Config)) *Lab {
	t.Helper()
	builds := cachedir.Build()
	testenv.RequireFile(t, filepath.Join(cachedir.K8sBin(builds, version), "kubelet"), "kubelet ("+cachedir.K8sBuildOf(version).Command()+")")
	ev := EtcdVersionFor(version)
	testenv.RequireFile(t, filepath.Join(builds, "etcd", "v"+ev, "bin", "etcd"), "etcd "+ev+" (build/k8s/etcd.sh "+ev+")")

	cfg := DefaultConfig()
	cfg.Topology = topo
	cfg.Version = version
	cfg.Cache = cachedir.Lab()
	cfg.BuildCache = builds
	cfg.StateDir = filepath.Join(t.TempDir(), "state")
	cfg.ModuleDir = moduleRoot(t)
	cfg.Prefix = "mlabt-"
	cfg.Log = slog.New(slog.NewTextHandler(tlog{t}, nil))
	cfg.Out = tlog{t}
	if tweak != nil {
		tweak(&cfg)
	}
	l, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			dumpConsoles(t, cfg.StateDir)
			l.DescribePods(context.Background(), "kube-system", DemoNamespace)
		}
		t0 := time.Now()
		require.NoError(t, l.Down(context.Background()))
		t.Logf("down in %s", time.Since(t0).Round(time.Millisecond))
		requireNothingLeft(t, l)
	})
	return l
}
