//go:build vagrant

package vagrant

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/hosttest"
	"github.com/moltproject/molt/internal/nspawn"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/moltproject/molt/internal/testlog"
	"github.com/moltproject/molt/lab"
	"github.com/moltproject/molt/trust"
)

// netPrefix starts the names of the network namespaces this test makes
// (lab.Network); the lab's own are mlab-, its tests' mlabt- and mlabe-.
const netPrefix = "mvag-"

// agentTokenVar is the agent's bootstrap token in agent.env, from
// install.sh's bootstrap-token=.
const agentTokenVar = "MOLT_AGENT_BOOTSTRAP_TOKEN"

// provisionRun is one provisioning script run on a host, with what the
// checks need to know.
type provisionRun struct {
	h   *nspawn.Host
	m   machine
	p   provisioner
	out string // the script's output
	env *provisionEnv
}

// provisionEnv is what the checks share: the folder the Vagrantfile shares
// between the VMs (/opt/molt/shared), the lab network, and — once
// coord-1's check has read the CA and the admin token it published there —
// the clients that trust that CA.
type provisionEnv struct {
	shared string
	netw   lab.Network
	// tlsHC trusts the cluster CA; coord presents the admin token to
	// coord-1, anon presents nothing.
	tlsHC       *http.Client
	coord, anon *client.Client
	caPin       string
	adminToken  string
}

// TestProvisioningScriptsInNspawnHosts runs the Vagrantfile's provisioning
// as `vagrant up` would, on systemd-nspawn hosts instead of VMs (which
// cannot boot on the CI machine): coord-1 and worker-1 boot from the
// shared Debian rootfs, each in a network namespace at its Vagrantfile
// address, with every folder the Vagrantfile syncs to it bind-mounted
// (read-only) where it syncs it, and every provisioner the Vagrantfile
// gives it runs in order — the script uploaded to /tmp/vagrant-shell and
// run as root with its arguments. The folder the Vagrantfile shares both
// ways (/opt/molt/shared) is one directory bind-mounted read-write into
// every host. After each script the test checks what the script is for:
// coord-1 bootstraps the cluster CA and publishes the pin and tokens,
// coord-2 joins it over TLS with them, worker-1's agent enrolls with the
// bootstrap token and the pin; at the end, that worker-1's agent reports
// to the coordinator a healthy node at the release's kubelet.
func TestProvisioningScriptsInNspawnHosts(t *testing.T) {
	hosttest.Require(t, "go", "ruby", "ip")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)

	// What the Vagrantfile syncs: molt's binaries (MOLT_BIN), the lab's
	// images and kubelet (MOLT_CACHE, MOLT_BUILD_CACHE) and each host's
	// rendered files (MOLT_LAB_RENDER).
	// The daemons are installed from the release's packages (make release
	// puts them in bin/release); moltctl is make build's.
	bin := t.TempDir()
	hosttest.GoBuild(t, "../cmd/moltctl", filepath.Join(bin, "moltctl"), "-ldflags=-s -w") // as make build: its compiled packages are reused
	hosttest.MakeRelease(t, "..", bin)
	cfg := lab.DefaultConfig()
	cfg.Cache, cfg.BuildCache = cachedir.Lab(), cachedir.Build()
	cfg.StateDir = t.TempDir()
	cfg.ModuleDir = ".."
	cfg.Log = testlog.New(t)
	l, err := lab.New(cfg)
	require.NoError(t, err)
	cfg = l.Config()
	in, err := l.EnsureInputs(ctx, cfg.Version)
	if errors.Is(err, lab.ErrMissing) {
		testenv.Missing(t, "%v", err)
	}
	require.NoError(t, err)
	render := t.TempDir()
	require.NoError(t, l.Render(render))
	shared := t.TempDir()
	ms := loadVagrantfile(t, map[string]string{
		"MOLT_CACHE": cfg.Cache, "MOLT_BUILD_CACHE": cfg.BuildCache, "MOLT_BIN": bin,
		"MOLT_LAB_RENDER": render, "MOLT_K8S_VERSION": cfg.Version, "MOLT_LAB_SMALL": "",
		"MOLT_COORDINATORS": testedCoordinators, "MOLT_SHARED": shared,
	})
	var machines []machine
	var specs []lab.HostSpec
	for _, name := range testedMachines {
		m := byName(t, ms, name)
		machines = append(machines, m)
		specs = append(specs, lab.HostSpec{Name: m.Name, IP: m.ip()})
	}

	// The private network: one namespace per host on a bridge, nothing in
	// this machine's own namespace (lab.Network).
	netw := lab.Network{Prefix: netPrefix, Hosts: specs}
	require.NoError(t, netw.Down(ctx), "a previous run's namespaces")
	require.NoError(t, netw.Up(ctx))
	t.Cleanup(func() { _ = netw.Down(context.Background()) })
	env := &provisionEnv{shared: shared, netw: netw}

	// The kernel settings provision.sh makes; the node host gets private,
	// writable copies of them (see prepareNode).
	script, err := os.ReadFile("provision.sh")
	require.NoError(t, err)
	sysctls := regexp.MustCompile(`(?m)^((?:vm|kernel)\.[a-z_.]+) = (\S+)$`).FindAllStringSubmatch(string(script), -1)
	require.NotEmpty(t, sysctls, "provision.sh's kernel settings")

	checks := map[string]func(t *testing.T, r provisionRun){
		"install-coordinator.sh": checkCoordinator,
		"install-agent.sh":       checkAgent,
		"provision.sh":           func(t *testing.T, r provisionRun) { checkNode(t, r, cfg, render, sysctls) },
	}
	require.ElementsMatch(t, testedScripts, slices.Collect(maps.Keys(checks)), "testedScripts and the checks here")

	for _, m := range machines {
		var binds, bindsRW []string
		for _, f := range m.Synced {
			if f.Disabled {
				continue
			}
			if f.Dst == sharedDst {
				require.Equal(t, shared, f.Src, "%s: the shared folder", m.Name)
				bindsRW = append(bindsRW, f.Src+":"+f.Dst)
				continue
			}
			require.Equal(t, "rsync", f.Type, "%s: synced folder %s", m.Name, f.Dst)
			binds = append(binds, f.Src+":"+f.Dst)
		}
		h := hosttest.Boot(t, ctx, nspawn.BootConfig{
			Name: netPrefix + m.Name, Rootfs: in.Rootfs, NetNS: netw.HostNS(m.Name), BindsRO: binds, Binds: bindsRW,
		}, "molt-coordinator", "molt-agent", "kubelet", "containerd")
		if slices.ContainsFunc(m.Provisioners, func(p provisioner) bool { return p.script() == "provision.sh" }) {
			prepareNode(t, ctx, h, sysctls)
		}
		for _, p := range m.Provisioners {
			check, ok := checks[p.script()]
			require.True(t, ok, "%s: no check for %s", m.Name, p.script())
			t.Logf("%s: %s %s", m.Name, p.script(), strings.Join(p.Args, " "))
			t0 := time.Now()
			out := runProvisioner(t, ctx, h, p)
			t.Logf("%s: %s done in %s", m.Name, p.script(), time.Since(t0).Round(time.Millisecond))
			check(t, provisionRun{h: h, m: m, p: p, out: out, env: env})
		}
		if m.Name == "coord-1" {
			registerCluster(t, ctx, env.coord, ms, cfg.Version)
		}
	}

	// The agent on worker-1 reports the node provision.sh made: kubelet
	// (the release's binary, answering /healthz) and containerd healthy.
	want := "v" + strings.TrimPrefix(cfg.Version, "v")
	var last api.AgentStatus
	require.Eventually(t, func() bool {
		a, ok := agentStatus(ctx, env.coord, "worker-1")
		last = a
		return ok && a.Registered && a.Healthy && a.Kubelet == want && a.Containerd != ""
	}, 2*time.Minute, time.Second, "worker-1's agent never reported a healthy node at %s: last %+v", want, &last)
	t.Logf("worker-1 as its agent reports it: kubelet %s, containerd %s, healthy", last.Kubelet, last.Containerd)
}

// runProvisioner does what Vagrant's shell provisioner does with path: and
// args:: upload the script to /tmp/vagrant-shell and run it as root with
// the arguments, in a login-like environment (not this test's).
func runProvisioner(t *testing.T, ctx context.Context, h *nspawn.Host, p provisioner) string {
	t.Helper()
	require.NoError(t, h.CopyFile(p.Path, "/tmp/vagrant-shell", 0o755))
	argv := append([]string{"env", "-i", "HOME=/root", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"/tmp/vagrant-shell"}, p.Args...)
	out, err := h.Exec(ctx, argv...)
	require.NoError(t, err, "%s on %s", p.script(), h.Name())
	return string(out)
}

// prepareNode gives a node host what an nspawn container lacks and a VM
// has, before provision.sh runs — the same preparation lab/host.go
// prepareHost does for the lab's hosts, and not provision.sh's business:
// writable cgroup controllers (containerd and the kubelet make cgroups),
// containerd's state on a tmpfs (overlayfs cannot stack on the host's
// overlay root), /dev/kmsg (the kubelet reads it), and the kernel settings
// provision.sh makes as private files bind-mounted over /proc/sys (which is
// read-only in the host and shared with the whole machine), starting at
// the machine's values, so provision.sh really has to set them.
func prepareNode(t *testing.T, ctx context.Context, h *nspawn.Host, sysctls [][]string) {
	t.Helper()
	var keys []string
	for _, kv := range sysctls {
		keys = append(keys, strings.ReplaceAll(kv[1], ".", "/"))
	}
	_, err := h.Exec(ctx, "sh", "-ec", `for c in /sys/fs/cgroup/*/; do mount -o remount,bind,rw "$c" 2>/dev/null || true; done
mkdir -p /var/lib/containerd
mountpoint -q /var/lib/containerd || mount -t tmpfs -o mode=0711 tmpfs /var/lib/containerd
[ -e /dev/kmsg ] || mknod /dev/kmsg c 1 11
mkdir -p /run/molt-test/sysctl
for f in `+strings.Join(keys, " ")+`; do
  n=/run/molt-test/sysctl/$(echo "$f" | tr / _)
  cat "/proc/sys/$f" >"$n"
  mount --bind "$n" "/proc/sys/$f"
done`)
	require.NoError(t, err)
}

// checkCoordinator: install-coordinator.sh NODE_ID IP FIRST_IP CLUSTER
// AGENTS leaves molt-coordinator.service running with that configuration
// and no agent token (there is none any more). The first member
// bootstraps: it published the CA certificate (the one it serves with),
// its pin, its admin token and a bootstrap token for AGENTS agents of
// CLUSTER in the shared folder, the secrets 0600; it serves only TLS,
// refuses anonymous requests with 401 and a plain-HTTP request with 400,
// and leads a one-member cluster for the admin token. Another member
// joined it with that pin and the admin token (a credential of its unit)
// and answers, under the same CA, as a voter of the grown cluster.
func checkCoordinator(t *testing.T, r provisionRun) {
	ctx := context.Background()
	require.Len(t, r.p.Args, 5)
	node, ip, first, cluster, agents := r.p.Args[0], r.p.Args[1], r.p.Args[2], r.p.Args[3], r.p.Args[4]
	require.Equal(t, r.m.Name, node)
	require.Equal(t, r.m.ip(), ip)
	requireActive(t, r.h, "molt-coordinator.service")
	requirePackage(t, r.h, "molt-coordinator")
	env := requireEnv(t, r.h, "/etc/molt/coordinator.env",
		"MOLT_COORDINATOR_HTTP_ADDR="+ip+":7080", "MOLT_COORDINATOR_RAFT_ADDR="+ip+":7081",
		"MOLT_COORDINATOR_NODE_ID="+node, "MOLT_COORDINATOR_TLS_SAN="+node)
	require.NotContains(t, env, "MOLT_COORDINATOR_AGENT_TOKEN", "the coordinator has no agent token any more")
	dataDir := filepath.Join(r.h.Root(), "var/lib/private/molt-coordinator")
	url := "https://" + ip + ":7080"

	if ip == first {
		require.Equal(t, "coord-1", node)
		require.NotContains(t, env, "MOLT_COORDINATOR_JOIN", "the first member bootstraps")
		caPEM := readShared(t, r.env.shared, "ca.crt", 0o644)
		require.Equal(t, string(readFile(t, filepath.Join(dataDir, "tls/ca.crt"))), caPEM, "the CA the member serves with")
		ca, err := trust.ParseCert([]byte(caPEM))
		require.NoError(t, err)
		r.env.caPin = strings.TrimSpace(readShared(t, r.env.shared, "ca.pin", 0o600))
		require.Equal(t, trust.Pin(ca), r.env.caPin, "ca.pin is the CA's pin")
		r.env.adminToken = strings.TrimSpace(readShared(t, r.env.shared, "admin.token", 0o600))
		require.Equal(t, strings.TrimSpace(string(readFile(t, filepath.Join(dataDir, "admin.token")))), r.env.adminToken)
		agentToken := strings.TrimSpace(readShared(t, r.env.shared, "agent.token", 0o600))
		require.NotEmpty(t, agentToken)
		require.Contains(t, r.out, r.env.caPin)

		pool := x509.NewCertPool()
		pool.AddCert(ca)
		r.env.tlsHC = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: r.env.netw.DialContext, TLSClientConfig: trust.ClientConfig(pool, nil)}}
		r.env.coord = client.New(url, r.env.tlsHC)
		r.env.coord.SetBearerToken(r.env.adminToken)
		r.env.anon = client.New(url, r.env.tlsHC)

		var members []api.Member
		require.Eventually(t, func() bool {
			members = nil
			_, err := r.env.coord.Do(ctx, http.MethodGet, "/v1/members", nil, &members)
			return err == nil && len(members) == 1 && members[0].Leader
		}, time.Minute, 100*time.Millisecond, "no leader on %s", url)
		require.Equal(t, node, members[0].ID)
		require.Equal(t, ip+":7081", members[0].RaftAddr)

		// The bootstrap token: one, for the cluster's agents, with as many
		// uses as the Vagrantfile has agent VMs; its ID begins the secret.
		var toks []api.Token
		_, err = r.env.coord.Do(ctx, http.MethodGet, "/v1/tokens", nil, &toks)
		require.NoError(t, err)
		var boot []api.Token
		for _, tk := range toks {
			if tk.Kind == api.TokenBootstrap {
				boot = append(boot, tk)
			}
		}
		require.Len(t, boot, 1, "bootstrap tokens: %+v", toks)
		require.Equal(t, cluster, boot[0].Cluster)
		require.Equal(t, agents, fmt.Sprint(boot[0].Uses))
		require.True(t, strings.HasPrefix(agentToken, boot[0].ID+"."), "agent.token is bootstrap token %s", boot[0].ID)
		require.WithinDuration(t, time.Now().Add(24*time.Hour), boot[0].Expires, 10*time.Minute)

		// moltctl as root on coord-1, with the configuration it was given.
		out, err := r.h.Exec(ctx, "/opt/molt/bin/moltctl", "member", "list")
		require.NoError(t, err, "moltctl on %s: %s", node, out)
		require.Contains(t, string(out), node)
	} else {
		require.NotNil(t, r.env.coord, "coord-1 is provisioned first")
		requireEnv(t, r.h, "/etc/molt/coordinator.env", "MOLT_COORDINATOR_JOIN="+first+":7080",
			"MOLT_COORDINATOR_CA_PIN="+r.env.caPin,
			"MOLT_COORDINATOR_JOIN_TOKEN_FILE=/run/credentials/molt-coordinator.service/join-token")
		require.NotContains(t, env, "MOLT_COORDINATOR_JOIN_TOKEN=", "the token is a file, not in the environment")
		tok := filepath.Join(r.h.Root(), "etc/molt/coordinator-join.token")
		require.Equal(t, r.env.adminToken, strings.TrimSpace(string(readFile(t, tok))))
		requireMode(t, tok, 0o600)
		require.Equal(t, string(readFile(t, filepath.Join(r.env.shared, "ca.crt"))),
			string(readFile(t, filepath.Join(dataDir, "tls/ca.crt"))), "the member got coord-1's CA at join")

		// The member itself answers over TLS under the cluster CA, for the
		// admin token, as a voter beside coord-1.
		self := client.New(url, r.env.tlsHC)
		self.SetBearerToken(r.env.adminToken)
		var members []api.Member
		require.Eventually(t, func() bool {
			members = nil
			_, err := self.Do(ctx, http.MethodGet, "/v1/members", nil, &members)
			return err == nil && slices.ContainsFunc(members, func(m api.Member) bool { return m.ID == node && m.RaftAddr == ip+":7081" })
		}, time.Minute, 200*time.Millisecond, "%s never listed as a member by itself", node)
		var leaders int
		for _, m := range members {
			if m.Leader {
				leaders++
			}
		}
		require.Equal(t, 1, leaders, "members: %+v", members)

		// The credential is there at every start, not just the first: the
		// member reads join-token-file whenever it starts.
		out, err := r.h.Exec(ctx, "systemctl", "restart", "molt-coordinator.service")
		require.NoError(t, err, "restart on %s: %s", node, out)
		requireActive(t, r.h, "molt-coordinator.service")
	}

	// Only TLS, and only with a credential.
	var health map[string]string
	_, err := client.New(url, r.env.tlsHC).Do(ctx, http.MethodGet, "/healthz", nil, &health)
	require.NoError(t, err)
	require.Equal(t, "ok", health["status"])
	_, err = client.New(url, r.env.tlsHC).Do(ctx, http.MethodGet, "/v1/members", nil, nil)
	var p *api.Problem
	require.ErrorAs(t, err, &p, "an anonymous request to %s", url)
	require.Equal(t, http.StatusUnauthorized, p.Status)
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: r.env.netw.DialContext}}
	resp, err := plain.Get("http://" + ip + ":7080/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to %s", ip)
}

// checkAgent: install-agent.sh COORDINATORS CLUSTER NODE leaves
// molt-agent.service running with that configuration, the bootstrap token
// and the CA pin coord-1 published, and the agent enrolls at its
// coordinator.
func checkAgent(t *testing.T, r provisionRun) {
	ctx := context.Background()
	require.Len(t, r.p.Args, 3)
	coordinator, cluster, node := r.p.Args[0], r.p.Args[1], r.p.Args[2]
	require.NotNil(t, r.env.coord, "coord-1 is provisioned first")
	for _, u := range strings.Split(coordinator, ",") {
		require.True(t, strings.HasPrefix(u, "https://"), "coordinator URL %s", u)
	}
	agentToken := strings.TrimSpace(readShared(t, r.env.shared, "agent.token", 0o600))
	requireActive(t, r.h, "molt-agent.service")
	requireEnv(t, r.h, "/etc/molt/agent.env",
		"MOLT_AGENT_COORDINATOR="+coordinator, agentTokenVar+"="+agentToken, "MOLT_AGENT_CA_PIN="+r.env.caPin,
		"MOLT_AGENT_CLUSTER="+cluster, "MOLT_AGENT_NODE="+node)
	requirePackage(t, r.h, "molt-agent")
	require.Equal(t, "lab", cluster, "the cluster registerCluster puts")
	require.Eventually(t, func() bool {
		a, ok := agentStatus(ctx, r.env.coord, node)
		return ok && a.Registered
	}, time.Minute, 200*time.Millisecond, "%s's agent never registered at %s", node, coordinator)
}

// readShared reads a file coord-1 published in the shared folder and
// checks its mode.
func readShared(t *testing.T, shared, name string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(shared, name)
	requireMode(t, p, mode)
	return string(readFile(t, p))
}

func requireMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, mode, st.Mode().Perm(), path)
}

// checkNode: provision.sh NAME IP VERSION makes the host a lab node —
// its rendered files in place, the kernel settings set, containerd running
// with the host's images imported, kubelet.service running the release's
// kubelet and answering /healthz — and a second run changes nothing and
// downloads nothing (the host's network reaches no mirror).
func checkNode(t *testing.T, r provisionRun, cfg lab.Config, render string, sysctls [][]string) {
	ctx := context.Background()
	require.Len(t, r.p.Args, 3)
	name, version := r.p.Args[0], r.p.Args[2]
	require.Equal(t, r.m.Name, name)
	require.Equal(t, strings.TrimPrefix(cfg.Version, "v"), version)
	require.NotContains(t, r.out, "apt-get", "every package is in the rootfs")
	hostDir := filepath.Join(render, name)

	// Every rendered file, byte for byte.
	root := filepath.Join(hostDir, "root")
	n := 0
	require.NoError(t, filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(r.h.Root(), rel))
		require.NoError(t, err, "/%s not installed", rel)
		require.Equal(t, string(want), string(got), "/%s", rel)
		n++
		return nil
	}))
	require.Positive(t, n)

	for _, kv := range sysctls {
		b, err := os.ReadFile(filepath.Join(r.h.Root(), "proc/sys", strings.ReplaceAll(kv[1], ".", "/")))
		require.NoError(t, err)
		require.Equal(t, kv[2], strings.TrimSpace(string(b)), kv[1])
	}

	requireActive(t, r.h, "containerd.service")
	imported, err := r.h.Exec(ctx, "ctr", "-n", lab.ContainerdNamespace, "images", "ls", "-q")
	require.NoError(t, err)
	list, err := os.ReadFile(filepath.Join(hostDir, "images"))
	require.NoError(t, err)
	for _, file := range strings.Fields(string(list)) {
		tags, err := repoTags(filepath.Join(cfg.Cache, "lab", "images", file))
		require.NoError(t, err)
		for _, tag := range tags {
			require.Contains(t, strings.Fields(string(imported)), tag, "image %s (%s) not imported", tag, file)
		}
	}

	release := filepath.Join(cachedir.K8sBin(cfg.BuildCache, version), "kubelet")
	require.Equal(t, hosttest.FileSum(t, release), hosttest.FileSum(t, filepath.Join(r.h.Root(), lab.KubeletBinary)))
	out, err := r.h.Exec(ctx, lab.KubeletBinary, "--version")
	require.NoError(t, err)
	require.Equal(t, "Kubernetes v"+version, strings.TrimSpace(string(out)))
	requireKubeletHealthy(t, r.h, name)

	out2 := runProvisioner(t, ctx, r.h, r.p)
	require.NotContains(t, out2, "apt-get")
	requireKubeletHealthy(t, r.h, name)
}

// requireKubeletHealthy waits for kubelet.service to run and answer
// /healthz (on 127.0.0.1:10248 in the host's network namespace); it needs
// no API server for that.
func requireKubeletHealthy(t *testing.T, h *nspawn.Host, name string) {
	t.Helper()
	ns := "/run/netns/" + netPrefix + name
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return lab.DialInNamespace(ctx, ns, network, addr)
		},
	}}
	var last string
	require.Eventually(t, func() bool {
		resp, err := hc.Get("http://127.0.0.1:10248/healthz")
		if err != nil {
			last = err.Error()
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = resp.Status + " " + string(b)
		return resp.StatusCode == http.StatusOK
	}, 2*time.Minute, 500*time.Millisecond, "kubelet on %s never healthy: %s", name, &last)
	requireActive(t, h, "kubelet.service")
}

func requireActive(t *testing.T, h *nspawn.Host, unit string) {
	t.Helper()
	out, err := h.Exec(context.Background(), "systemctl", "show", "-p", "ActiveState,SubState,UnitFileState", unit)
	require.NoError(t, err)
	require.Equal(t, "ActiveState=active\nSubState=running\nUnitFileState=enabled\n", string(out), unit)
}

// requireEnv checks that the env file at path, inside h, holds lines and
// is readable by root only (it holds tokens), and returns its content.
func requireEnv(t *testing.T, h *nspawn.Host, path string, lines ...string) string {
	t.Helper()
	full := filepath.Join(h.Root(), path)
	b, err := os.ReadFile(full)
	require.NoError(t, err)
	got := strings.Split(string(b), "\n")
	for _, l := range lines {
		require.Contains(t, got, l, path)
	}
	requireMode(t, full, 0o600)
	return string(b)
}

// registerCluster puts the Vagrant lab as cluster "lab" (what an operator
// does after `vagrant up`; no kubeconfig: nothing here needs the API
// server), so the agents' registrations are admitted.
func registerCluster(t *testing.T, ctx context.Context, coord *client.Client, ms []machine, version string) {
	t.Helper()
	spec := api.ClusterSpec{Name: "lab", Kind: api.ClusterStandalone, Channel: "regular", Version: strings.TrimPrefix(version, "v")}
	topo := lab.FullTopology()
	for _, p := range []struct {
		name string
		role lab.Role
	}{{"cplb", lab.RoleControlPlaneLB}, {"cp", lab.RoleControlPlane}, {"lb", lab.RoleLoadBalancer}, {"workers", lab.RoleWorker}} {
		pool := api.Pool{Name: p.name, Role: api.Role(p.role)}
		for _, h := range topo.WithRole(p.role) {
			pool.Nodes = append(pool.Nodes, api.Node{Name: h.Name, Address: byName(t, ms, h.Name).ip()})
		}
		spec.Pools = append(spec.Pools, pool)
	}
	_, err := coord.Do(ctx, http.MethodPut, "/v1/clusters/lab", spec, nil)
	require.NoError(t, err)
}

// agentStatus is what the coordinator knows of node's agent in cluster lab.
func agentStatus(ctx context.Context, coord *client.Client, node string) (api.AgentStatus, bool) {
	var c api.Cluster
	if _, err := coord.Do(ctx, http.MethodGet, "/v1/clusters/lab", nil, &c); err != nil {
		return api.AgentStatus{}, false
	}
	for _, a := range c.Status.Agents {
		if a.Node == node {
			return a, true
		}
	}
	return api.AgentStatus{}, false
}

// repoTags are the image references a docker-archive tarball names.
func repoTags(path string) ([]string, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var tags []string
	for _, d := range m {
		tags = append(tags, d.RepoTags...)
	}
	return tags, nil
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// requirePackage: the daemon came from the release's package (dpkg has it
// installed, its binary in /usr/bin), not from a binary copied in.
func requirePackage(t *testing.T, h *nspawn.Host, pkg string) {
	t.Helper()
	out, err := h.Exec(context.Background(), "dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}", pkg)
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `^installed \d+\.\d+\.\d+`, string(out), "dpkg's record of %s", pkg)
	require.FileExists(t, filepath.Join(h.Root(), "usr/bin", pkg))
	require.NoFileExists(t, filepath.Join(h.Root(), "usr/local/bin", pkg), "no binary copied in beside the package's")
}
