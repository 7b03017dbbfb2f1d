package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moltproject/molt/kube"
)

// Config is the lab's configuration. Flags and environment variables are
// read by cmd/molt-lab and turned into one of these.
type Config struct {
	// StateDir holds state.json, the PKI, kubeconfigs and console logs.
	StateDir string
	// Cache is ${MOLT_CACHE}: what the lab makes itself — lab/tools,
	// lab/images, rootfs/ (see EnsureInputs).
	Cache string
	// BuildCache is ${MOLT_BUILD_CACHE}: the Kubernetes and etcd builds of
	// build/k8s (k8s/vX/bin, etcd/vY/bin). Empty means Cache.
	BuildCache string
	// ModuleDir is this repository's root, for building the lab's tools.
	ModuleDir string
	// Version is the Kubernetes version every host starts at ("1.34.4").
	Version string
	// Topology is the set of hosts.
	Topology Topology
	// Prefix starts every network namespace name (and so every name the
	// lab creates on this machine).
	Prefix string
	// ReadyTimeout bounds the wait for the API and for every Node Ready.
	ReadyTimeout time.Duration
	// Parallel is how many hosts are prepared at once.
	Parallel int
	// AfterHost, if set, runs once per host after the lab prepared it and
	// before waiting for the cluster: the hook for installing molt-agent
	// (systemd/install.sh) or anything else a test needs on every host.
	AfterHost func(ctx context.Context, h *Host, spec HostSpec) error
	// Log receives structured detail; Out receives one progress line per step.
	Log *slog.Logger
	Out io.Writer
}

// DefaultConfig is the full topology at 1.34.4 with state under
// /var/lib/molt/lab and the cache at /var/cache/molt.
func DefaultConfig() Config {
	return Config{
		StateDir:     "/var/lib/molt/lab",
		Cache:        "/var/cache/molt",
		ModuleDir:    ".",
		Version:      "1.34.4",
		Topology:     FullTopology(),
		Prefix:       "mlab-",
		ReadyTimeout: 5 * time.Minute,
		Parallel:     2,
		Log:          slog.New(slog.DiscardHandler),
		Out:          io.Discard,
	}
}

// State is what `up` records so that `down` and `status`, in another
// process, know what exists.
type State struct {
	Topology Topology  `json:"topology"`
	Version  string    `json:"version"`
	Prefix   string    `json:"prefix"`
	Started  time.Time `json:"started"`
}

// Lab drives one lab.
type Lab struct {
	cfg Config
	net Network

	// inputsMu guards what EnsureInputs made in this process.
	inputsMu   sync.Mutex
	toolsBuilt bool
	inputs     map[string]Inputs
}

// New returns a lab for cfg. If a state file exists its topology, version
// and prefix win over cfg's, so `down` removes what `up` made.
func New(cfg Config) (*Lab, error) {
	if st, err := readState(cfg.StateDir); err == nil {
		cfg.Topology, cfg.Version, cfg.Prefix = st.Topology, st.Version, st.Prefix
	}
	if err := cfg.Topology.Validate(); err != nil {
		return nil, err
	}
	cfg.Version = strings.TrimPrefix(cfg.Version, "v")
	if cfg.BuildCache == "" {
		cfg.BuildCache = cfg.Cache
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Parallel < 1 {
		cfg.Parallel = 1
	}
	return &Lab{cfg: cfg, net: Network{Prefix: cfg.Prefix, Hosts: cfg.Topology.Hosts}}, nil
}

// Network returns the lab's network (for DialContext).
func (l *Lab) Network() Network { return l.net }

// Config returns the effective configuration.
func (l *Lab) Config() Config { return l.cfg }

// Kubeconfig is the admin kubeconfig's path. Its server address is only
// reachable from the lab namespace: use Kube, or
// `ip netns exec <prefix>lab kubectl --kubeconfig ...`.
func (l *Lab) Kubeconfig() string {
	return filepath.Join(l.cfg.StateDir, "kubeconfig", "admin.conf")
}

// AdminKubeconfig returns the admin kubeconfig (cluster-admin, embedded
// client certificate). Its server is the control-plane LB's address in the
// lab subnet: it works as is for a process inside the lab's network
// namespace, such as a coordinator started there.
func (l *Lab) AdminKubeconfig() ([]byte, error) {
	b, err := os.ReadFile(l.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMissing, err)
	}
	return b, nil
}

// apiTimeout bounds each request of Kube's client.
const apiTimeout = 15 * time.Second

// Kube is an admin client for the lab cluster that dials through the lab
// namespace, so it works from this machine's own namespace.
func (l *Lab) Kube() (*kube.Client, error) { return l.kube(apiTimeout) }

// KubeForWatches is Kube without the bound on each request, for long
// watches (an informer's watch cut every apiTimeout would be resumed, but
// logged each time).
func (l *Lab) KubeForWatches() (*kube.Client, error) { return l.kube(0) }

func (l *Lab) kube(timeout time.Duration) (*kube.Client, error) {
	b, err := l.AdminKubeconfig()
	if err != nil {
		return nil, err
	}
	cfg := kube.DefaultConfig()
	cfg.Logger = l.cfg.Log
	kc, err := kube.NewFromKubeconfig(cfg, b, kube.WithDial(l.net.DialContext), kube.WithTimeout(timeout))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMissing, err)
	}
	return kc, nil
}

func (l *Lab) step(format string, args ...any) {
	fmt.Fprintf(l.cfg.Out, "==> "+format+"\n", args...)
}

// Up brings the lab to the running state: tools and images built, PKI
// written, network, image registry and hosts up, control plane answering
// through the LB, every Node Ready at the version, the add-ons (kube-proxy,
// CoreDNS) of the version rolled out, sample workloads running. Anything
// already in place is kept, so Up after Up (or after a partial Up) is safe.
func (l *Lab) Up(ctx context.Context) error {
	start := time.Now()
	c := l.cfg
	in, err := l.EnsureInputs(ctx, c.Version)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return fmt.Errorf("%w: %v", ErrHost, err)
	}
	if err := writeState(c.StateDir, State{Topology: c.Topology, Version: c.Version, Prefix: c.Prefix, Started: start}); err != nil {
		return err
	}

	l.step("PKI and kubeconfigs in %s", c.StateDir)
	pki, err := EnsurePKI(c.StateDir, l.pkiSpec())
	if err != nil {
		return err
	}
	changed, err := raiseInotifyLimits()
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		l.step("kernel inotify limits raised for the hosts' daemons: %s", strings.Join(changed, ", "))
	}
	l.step("network %s (bridge %s in namespace %s)", Subnet, bridgeName, l.net.LabNS())
	if err := l.net.Up(ctx); err != nil {
		return err
	}
	if err := l.upRegistry(ctx, in); err != nil {
		return err
	}
	if err := l.upHosts(ctx, in.Rootfs, hostInputs{
		topo: c.Topology, version: c.Version, k8sBin: in.K8sBin, pki: pki, images: in.Images,
		consoles: filepath.Join(c.StateDir, "console"), containerd: builtContainerd(in),
	}); err != nil {
		return err
	}
	kc, err := l.Kube()
	if err != nil {
		return err
	}
	l.step("waiting for the API through the LB at %s", c.Topology.APIEndpoint())
	if err := waitAPI(ctx, kc, c.ReadyTimeout); err != nil {
		return err
	}
	if err := bindClusterAdmins(ctx, kc); err != nil {
		return err
	}
	l.step("waiting for %d Nodes Ready at v%s", len(c.Topology.Hosts), c.Version)
	var notReady []string
	if err := waitNodesReady(ctx, kc, c.Topology, c.Version, c.ReadyTimeout, l.cfg.Out, &notReady); err != nil {
		l.DescribeHosts(context.WithoutCancel(ctx), notReady)
		return err
	}
	if err := labelNodes(ctx, kc, c.Topology); err != nil {
		return err
	}
	l.step("add-ons at v%s: kube-proxy (%s mode) and CoreDNS %s (Service kube-dns at %s)", c.Version, KubeProxyMode, CoreDNSVersion, ClusterDNS)
	if err := l.installAddons(ctx, kc); err != nil {
		return err
	}
	l.step("sample workloads in namespace %s", DemoNamespace)
	if err := applyWorkloads(ctx, kc); err != nil {
		return err
	}
	if err := waitWorkloads(ctx, kc, c.ReadyTimeout); err != nil {
		return err
	}
	// The lab is the load-balancer controller of its LoadBalancer Service:
	// lb-1's HAProxy serves it (dataplane.go), so lb-1's address is where.
	if lbs := c.Topology.WithRole(RoleLoadBalancer); len(lbs) > 0 {
		if err := kc.SetLoadBalancerIngress(ctx, DemoNamespace, DemoDeploy, []string{lbs[0].IP}); err != nil {
			return fmt.Errorf("%w: %v", ErrNotReady, err)
		}
	}
	// Up means a client gets answers: by Service name and through lb-1,
	// whose HAProxy marks the workers up only after two passing checks.
	l.step("waiting for the sample workload to answer on every path")
	if err := poll(ctx, c.ReadyTimeout, 500*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		if err := l.CheckWorkloadPaths(ctx); err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	l.step("lab up in %s; kubeconfig %s (reach it with: ip netns exec %s kubectl --kubeconfig %s get nodes)",
		time.Since(start).Round(time.Second), l.Kubeconfig(), l.net.LabNS(), l.Kubeconfig())
	return nil
}

// builtContainerd is the containerd a host at in's release gets copied
// over the rootfs's, or "" when the release ships the rootfs's own.
func builtContainerd(in Inputs) string {
	if in.ContainerdBuilt {
		return in.Containerd
	}
	return ""
}

// upRegistry starts the lab's registry (registry.go) unless it runs, and
// pushes into it the add-on images of the lab's version and of every
// release this Lab made inputs for (PublishRelease before Up, as the demo
// and the end-to-end test do): the images later add-on rollouts pull.
func (l *Lab) upRegistry(ctx context.Context, in Inputs) error {
	l.step("image registry at %s (mirror of %s for every host)", RegistryAddr(), strings.Join(MirroredRegistries, ", "))
	if err := l.ensureRegistry(ctx); err != nil {
		return err
	}
	l.inputsMu.Lock()
	known := map[string]Inputs{in.Version: in}
	for v, vin := range l.inputs {
		known[v] = vin
	}
	l.inputsMu.Unlock()
	for _, v := range slices.Sorted(maps.Keys(known)) {
		if err := l.pushImages(ctx, known[v].Images, addonImages(v)); err != nil {
			return err
		}
	}
	return nil
}

// upHosts boots and prepares every host that is not running yet.
func (l *Lab) upHosts(ctx context.Context, rootfs string, base hostInputs) error {
	sem := make(chan struct{}, l.cfg.Parallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, spec := range l.cfg.Topology.Hosts {
		ns := l.net.HostNS(spec.Name)
		if _, ok := findHost(spec.Name, ns); ok {
			l.step("host %s: already running", spec.Name)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			in := base
			in.spec = spec
			t0 := time.Now()
			h, err := bootHost(ctx, rootfs, ns, in)
			if err == nil {
				l.step("host %s (%s, %s): booted in %s", spec.Name, spec.Role, spec.IP, time.Since(t0).Round(time.Millisecond))
				err = prepareHost(ctx, h, in)
			}
			if err == nil && l.cfg.AfterHost != nil {
				err = l.cfg.AfterHost(ctx, h, spec)
			}
			if err == nil {
				l.step("host %s: containerd, images, kubelet up in %s", spec.Name, time.Since(t0).Round(time.Millisecond))
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("host %s: %w", spec.Name, err))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (l *Lab) pkiSpec() PKISpec {
	t := l.cfg.Topology
	var apiSANs, etcdSANs, nodes []string
	for _, h := range t.Hosts {
		nodes = append(nodes, h.Name)
		switch h.Role {
		case RoleControlPlaneLB:
			apiSANs = append(apiSANs, h.IP, h.Name)
		case RoleControlPlane:
			apiSANs = append(apiSANs, h.IP, h.Name)
			etcdSANs = append(etcdSANs, h.IP, h.Name)
		}
	}
	return PKISpec{ClusterName: "molt-lab", APIEndpoint: t.APIEndpoint(), APIServerSANs: apiSANs, EtcdSANs: etcdSANs, Nodes: nodes}
}

// Down stops every host, deletes every namespace (and with them the bridge
// and veths) and removes the state directory. It finds hosts by scanning
// /proc, so it also cleans up after an `up` that crashed before recording
// anything. Down on a lab that is not there does nothing.
func (l *Lab) Down(ctx context.Context) error {
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	// Every host in one of the lab's namespaces: the topology's and the
	// instance groups' (instances.go), found by their namespace's prefix.
	hosts := hostsWithPrefix(l.cfg.Prefix)
	for _, name := range slices.Sorted(maps.Keys(hosts)) {
		rh := hosts[name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.step("stopping host %s (nspawn pid %d)", name, rh.nspawnPID)
			if err := stopHost(ctx, rh, 30*time.Second); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := l.stopRegistry(ctx); err != nil {
		errs = append(errs, err)
	}
	l.step("removing namespaces %s*", l.cfg.Prefix)
	namespaces := l.net.Namespaces()
	for _, ns := range namespacesWithPrefix(l.cfg.Prefix) {
		if !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	if err := killNamespacePIDs(ctx, namespaces); err != nil {
		errs = append(errs, err)
	}
	// Instances' namespaces, then the network's. An instance's veth is
	// not off the bridge when `ip netns del` returns (the kernel tears a
	// namespace down later, see delLink), but the bridge's namespace goes
	// right after, and every link in it with it: nothing is left where
	// anyone could see it.
	for _, ns := range namespaces[len(l.net.Namespaces()):] {
		if err := run(ctx, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, fmt.Errorf("%w: %v", ErrNetwork, err))
		}
	}
	if err := l.net.Down(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(l.cfg.StateDir); err != nil {
		errs = append(errs, fmt.Errorf("%w: %v", ErrHost, err))
	}
	return errors.Join(errs...)
}

func readState(dir string) (State, error) {
	var st State
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

func writeState(dir string, st State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrHost, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o600); err != nil {
		return fmt.Errorf("%w: %v", ErrHost, err)
	}
	return nil
}

// DescribeHosts writes to the lab's Out what the hosts' kubelets say:
// whether the unit runs and the end of its journal. Up calls it for hosts
// that never became Ready Nodes (a failed lab is removed by its caller, and
// this is then all that is left); tests call it when they fail.
func (l *Lab) DescribeHosts(ctx context.Context, hosts []string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, h := range hosts {
		out, err := l.Exec(ctx, h, "sh", "-c", "systemctl is-active kubelet; journalctl -u kubelet --no-pager -n 25 | cut -c1-300")
		fmt.Fprintf(l.cfg.Out, "--- %s: kubelet (err %v)\n%s", h, err, out)
	}
}
