package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moltproject/molt/internal/nspawn"
)

// hostInputs is everything a host's preparation copies in from this machine.
type hostInputs struct {
	spec    HostSpec
	topo    Topology
	version string
	k8sBin  string // dir with kubelet
	// containerd, if set, replaces the rootfs's containerd daemon (a
	// release that ships build/containerd's, see Inputs.ContainerdBuilt).
	containerd string
	pki        *PKI
	images     ImageSet
	consoles   string // dir for console logs
}

// bootHost starts the host's systemd under nspawn in its namespace. The
// console goes to a file, not a pipe: the host must outlive `molt-lab up`.
func bootHost(ctx context.Context, rootfs, netns string, in hostInputs) (*Host, error) {
	if err := os.MkdirAll(in.consoles, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHost, err)
	}
	console, err := os.OpenFile(filepath.Join(in.consoles, in.spec.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrHost, err)
	}
	defer console.Close() // nspawn has its own copy of the descriptor
	// Not nspawn.Boot: a lab host must outlive this process (console in a
	// file, no Wait tied to a Host value), and any later process finds it
	// by scanning /proc (findHost). The flags are the same (MACHINE-NOTES),
	// and so is the way to find the init (nspawn.InitOf).
	args := []string{
		"-D", rootfs, "--volatile=overlay", "-b", "--register=no", "--keep-unit",
		"--console=read-only", "-M", in.spec.Name, "--capability=all",
		"--network-namespace-path=/run/netns/" + netns,
	}
	cmd := exec.Command("systemd-nspawn", args...)
	cmd.Env = append(os.Environ(), "SYSTEMD_SECCOMP=0")
	cmd.Stdout, cmd.Stderr = console, console
	// Its own process group: a Ctrl-C on `molt-lab up` does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrHost, in.spec.Name, err)
	}
	go func() { _ = cmd.Wait() }() // reap it if this process outlives it
	h, err := waitHost(ctx, in.spec.Name, netns, 90*time.Second)
	if err != nil {
		if rh, ok := findHost(in.spec.Name, netns); ok {
			_ = stopHost(context.Background(), rh, 10*time.Second)
		}
		return nil, err
	}
	return h, nil
}

// prepareHost turns a freshly booted host into a Kubernetes node, the way
// MACHINE-NOTES describes: writable cgroup controllers, containerd on a
// tmpfs, /dev/kmsg, images imported, PKI and manifests written, kubelet
// started as a systemd unit.
func prepareHost(ctx context.Context, h *Host, in hostInputs) error {
	sh := func(script string) error {
		_, err := h.Exec(ctx, "sh", "-ec", script)
		return err
	}
	// nspawn mounts the v1 controllers read-only; containerd and the
	// kubelet create cgroups. overlayfs cannot stack on the host's overlay
	// root, so containerd's state lives on a tmpfs.
	if err := sh(`for c in /sys/fs/cgroup/*/; do mount -o remount,bind,rw "$c" 2>/dev/null || true; done
mkdir -p /var/lib/containerd
mountpoint -q /var/lib/containerd || mount -t tmpfs -o mode=0711 tmpfs /var/lib/containerd
[ -e /dev/kmsg ] || mknod /dev/kmsg c 1 11`); err != nil {
		return err
	}
	// The kubelet refuses to start unless the kernel tunables it wants are
	// set (protectKernelDefaults) or it can set them (it cannot: /proc/sys
	// is read-only here, and they are machine-wide). Show it the values it
	// wants by bind-mounting files over them in this host's mount
	// namespace only; the machine's real settings are untouched.
	if err := sh(`mkdir -p /run/molt-lab/sysctl
for kv in ` + kernelTunables + `; do
  f=${kv%%=*}; v=${kv#*=}; n=/run/molt-lab/sysctl/$(echo "$f" | tr / _)
  echo "$v" >"$n"
  grep -q " /proc/sys/$f " /proc/self/mountinfo || mount --bind "$n" "/proc/sys/$f"
done`); err != nil {
		return err
	}
	files, err := hostFiles(in)
	if err != nil {
		return err
	}
	for path, f := range files {
		if err := h.WriteFile(path, f.data, f.mode); err != nil {
			return err
		}
	}
	if err := h.CopyFile(filepath.Join(in.k8sBin, "kubelet"), KubeletBinary, 0o755); err != nil {
		return err
	}
	if in.containerd != "" {
		if err := h.CopyFile(in.containerd, "/usr/bin/containerd", 0o755); err != nil {
			return err
		}
	}
	if err := sh("systemctl restart containerd && for i in $(seq 100); do ctr version >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1"); err != nil {
		return err
	}
	for _, ref := range imagesFor(in.spec.Role, in.version) {
		if err := importImage(ctx, h, in.images[ref]); err != nil {
			return err
		}
	}
	return sh("systemctl daemon-reload && systemctl enable --now kubelet.service")
}

// kernelTunables are the sysctls kubelet's container manager checks, with
// the values it expects (pkg/kubelet/cm setupKernelTunables).
const kernelTunables = "vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000"

type hostFile struct {
	data []byte
	mode os.FileMode
}

// hostFiles is every configuration file a host gets, by path inside it.
func hostFiles(in hostInputs) (map[string]hostFile, error) {
	kc, err := KubeletConfig()
	if err != nil {
		return nil, err
	}
	cni, err := CNIConfig(in.spec)
	if err != nil {
		return nil, err
	}
	hosts := "127.0.0.1 localhost\n::1 localhost\n"
	for _, o := range in.topo.Hosts {
		hosts += o.IP + " " + o.Name + "\n"
	}
	out := map[string]hostFile{
		"/etc/hosts":           {[]byte(hosts), 0o644},
		ContainerdConfig:       {[]byte(ContainerdConfigTOML()), 0o644},
		CNIConfigPath:          {cni, 0o644},
		KubeletConfigPath:      {kc, 0o644},
		KubeletUnitPath:        {[]byte(KubeletUnit(in.spec)), 0o644},
		ManifestDir + "/.keep": {nil, 0o644},
	}
	copyIn := func(src, dst string, mode os.FileMode) error {
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrHost, err)
		}
		out[dst] = hostFile{b, mode}
		return nil
	}
	if err := copyIn(in.pki.KubeletKubeconfig(in.spec.Name), kubeletConf, 0o600); err != nil {
		return nil, err
	}
	pkiFiles := []string{"ca.crt"}
	if in.spec.Role == RoleControlPlane {
		pkiFiles = append(pkiFiles, "ca.key", "apiserver.crt", "apiserver.key", "apiserver-kubelet-client.crt",
			"apiserver-kubelet-client.key", "front-proxy-ca.crt", "front-proxy-ca.key", "front-proxy-client.crt",
			"front-proxy-client.key", "apiserver-etcd-client.crt", "apiserver-etcd-client.key", "sa.key", "sa.pub",
			"etcd/ca.crt", "etcd/ca.key", "etcd/server.crt", "etcd/server.key", "etcd/peer.crt", "etcd/peer.key",
			"etcd/healthcheck-client.crt", "etcd/healthcheck-client.key")
		for _, c := range []string{"controller-manager.conf", "scheduler.conf", "admin.conf"} {
			if err := copyIn(filepath.Join(in.pki.KubeconfigDir, c), "/etc/kubernetes/"+c, 0o600); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range pkiFiles {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(f, ".key") {
			mode = 0o600
		}
		if err := copyIn(filepath.Join(in.pki.Dir, f), HostPKIDir+"/"+f, mode); err != nil {
			return nil, err
		}
	}
	if in.spec.Role == RoleLoadBalancer {
		out[haproxyDir+"/haproxy.cfg"] = hostFile{[]byte(HAProxyConfig(in.topo.WithRole(RoleWorker))), 0o644}
	}
	cp := ControlPlane{Version: in.version, Members: in.topo.WithRole(RoleControlPlane), LBAddress: in.topo.APIEndpoint()}
	pods, err := StaticPods(in.spec, cp)
	if err != nil {
		return nil, err
	}
	for name, b := range pods {
		out[ManifestDir+"/"+name] = hostFile{b, 0o644}
	}
	return out, nil
}

// imagesFor lists the images a host of role r imports.
func imagesFor(r Role, version string) []string {
	refs := []string{PauseImage, EchoImage}
	switch r {
	case RoleControlPlane:
		refs = append(refs, EtcdImage(version), ComponentImage("kube-apiserver", version),
			ComponentImage("kube-controller-manager", version), ComponentImage("kube-scheduler", version))
	case RoleControlPlaneLB:
		refs = append(refs, CPLBImage)
	case RoleLoadBalancer:
		refs = append(refs, HAProxyImage)
	}
	return refs
}

// importImage streams an image tarball into the host's containerd, in the
// namespace the CRI plugin reads, without copying it into the host first.
func importImage(ctx context.Context, h *Host, tarball string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return fmt.Errorf("%w: image %s: %v", ErrMissing, tarball, err)
	}
	defer f.Close()
	cmd := h.Command(ctx, "ctr", "-n", ContainerdNamespace, "images", "import", "-")
	cmd.Stdin = f
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: import %s on %s: %v: %s", ErrHost, filepath.Base(tarball), h.Name, err, out)
	}
	return nil
}

// runningHost is a host found by scanning /proc, so `down` and `status`
// work from a different process than the one that booted it.
type runningHost struct {
	nspawnPID int
	initPID   int
}

// findHost returns the systemd-nspawn process that runs machine name in
// namespace netns, or ok=false.
func findHost(name, netns string) (runningHost, bool) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.HasSuffix(strings.SplitN(string(b), "\x00", 2)[0], "systemd-nspawn") {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if !hasArgPair(args, "-M", name) || !hasArg(args, "--network-namespace-path=/run/netns/"+netns) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		return runningHost{nspawnPID: pid, initPID: nspawn.InitOf(pid)}, true
	}
	return runningHost{}, false
}

// hostsWithPrefix finds every systemd-nspawn process whose network
// namespace's name starts with prefix, by machine name: the topology's
// hosts and the instances of the lab's instance groups, whatever a state
// file says.
func hostsWithPrefix(prefix string) map[string]runningHost {
	out := map[string]runningHost{}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.HasSuffix(strings.SplitN(string(b), "\x00", 2)[0], "systemd-nspawn") {
			continue
		}
		args := strings.Split(string(b), "\x00")
		name, inNS := "", false
		for i, a := range args {
			if a == "-M" && i+1 < len(args) {
				name = args[i+1]
			}
			inNS = inNS || strings.HasPrefix(a, "--network-namespace-path=/run/netns/"+prefix)
		}
		if name == "" || !inNS {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		out[name] = runningHost{nspawnPID: pid, initPID: nspawn.InitOf(pid)}
	}
	return out
}

func hasArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

func hasArgPair(args []string, k, v string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == k && args[i+1] == v {
			return true
		}
	}
	return false
}

// stopHost asks nspawn to power the host off (SIGTERM), waits up to
// timeout, then kills nspawn's process group. Every process of the host is
// in the host's PID namespace and dies with its init.
func stopHost(ctx context.Context, rh runningHost, timeout time.Duration) error {
	_ = syscall.Kill(rh.nspawnPID, syscall.SIGTERM)
	if waitGone(ctx, rh.nspawnPID, timeout) {
		return nil
	}
	_ = syscall.Kill(-rh.nspawnPID, syscall.SIGKILL)
	_ = syscall.Kill(rh.nspawnPID, syscall.SIGKILL)
	if rh.initPID != 0 {
		_ = syscall.Kill(rh.initPID, syscall.SIGKILL)
	}
	if waitGone(ctx, rh.nspawnPID, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("%w: nspawn pid %d survived SIGKILL", ErrHost, rh.nspawnPID)
}

// waitGone polls until pid no longer exists (or is a zombie nobody reaps).
func waitGone(ctx context.Context, pid int, timeout time.Duration) bool {
	return poll(ctx, timeout, 100*time.Millisecond, func(context.Context) (bool, string, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true, "", nil
		}
		f := strings.Fields(string(b))
		return len(f) > 2 && f[2] == "Z", "", nil
	}) == nil
}
