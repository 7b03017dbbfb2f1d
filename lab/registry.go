package lab

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The lab's image registry. Hosts reach nothing outside the lab, and an
// agent imports a release's image archives only during its own node's
// upgrade — for workers after the add-ons step, whose DaemonSet rolls a new
// kube-proxy onto every node at once. So the lab runs a registry
// (lab/tools/registry: go-containerregistry's, blobs on disk under
// Cache/lab/registry) on the bridge address inside its namespace, pushes
// the add-on images of every release it knows into it, and every host's
// containerd pulls registry.k8s.io and molt.local images through it
// (ContainerdConfigTOML's mirrors). Add-on pods use imagePullPolicy
// IfNotPresent: an image already on the node is used as it is.
const (
	// RegistryPort is the registry's port on GatewayIP.
	RegistryPort = 5000
	registryTool = "registry"
)

// RegistryAddr is host:port of the lab's registry, as hosts reach it.
func RegistryAddr() string { return net.JoinHostPort(GatewayIP, strconv.Itoa(RegistryPort)) }

// MirroredRegistries are the registries every host's containerd pulls
// through the lab registry.
var MirroredRegistries = []string{"registry.k8s.io", "molt.local"}

// mirrorRef is where the registry at addr holds image ref: the same
// repository and tag ("registry.k8s.io/kube-proxy:v1.34.4" →
// "10.77.0.1:5000/kube-proxy:v1.34.4"), which is what a host's containerd
// asks its mirror for.
func mirrorRef(addr, ref string) (name.Tag, error) {
	t, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("%w: %s: %v", ErrImage, ref, err)
	}
	if !slices.Contains(MirroredRegistries, t.RegistryStr()) {
		return name.Tag{}, fmt.Errorf("%w: %s: registry %s is not mirrored by the lab (%v)", ErrImage, ref, t.RegistryStr(), MirroredRegistries)
	}
	m, err := name.NewTag(addr+"/"+t.RepositoryStr()+":"+t.TagStr(), name.Insecure)
	if err != nil {
		return name.Tag{}, fmt.Errorf("%w: %s: %v", ErrImage, ref, err)
	}
	return m, nil
}

// registryPID finds the lab's registry: the tool's process in the lab's
// network namespace (any process may have started it).
func (l *Lab) registryPID() (int, bool) {
	labNS, err := os.Stat(nsPath(l.net.LabNS()))
	if err != nil {
		return 0, false
	}
	bin := filepath.Join(l.cfg.Cache, "lab", "tools", registryTool)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || strings.SplitN(string(b), "\x00", 2)[0] != bin {
			continue
		}
		dir := filepath.Dir(p)
		ns, err := os.Stat(filepath.Join(dir, "ns", "net"))
		if err != nil || !sameFile(ns, labNS) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		return pid, true
	}
	return 0, false
}

// sameFile compares device and inode, which is how network namespaces
// are told apart.
func sameFile(a, b os.FileInfo) bool {
	x, ok1 := a.Sys().(*syscall.Stat_t)
	y, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && x.Dev == y.Dev && x.Ino == y.Ino
}

// ensureRegistry starts the registry in the lab's namespace unless it
// runs, and waits until it answers. Like a host, it is its own process
// group with its output in a file (StateDir/registry.log): it outlives
// `molt-lab up`, and Down stops it.
func (l *Lab) ensureRegistry(ctx context.Context) error {
	if _, ok := l.registryPID(); !ok {
		bin := filepath.Join(l.cfg.Cache, "lab", "tools", registryTool)
		logf, err := os.OpenFile(filepath.Join(l.cfg.StateDir, "registry.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("%w: registry log: %v", ErrHost, err)
		}
		defer logf.Close() // the registry has its own copy
		// `ip netns exec` execs the tool: the PID is the registry's.
		cmd := exec.Command("ip", "netns", "exec", l.net.LabNS(), bin,
			"-listen", RegistryAddr(), "-dir", filepath.Join(l.cfg.Cache, "lab", "registry"))
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%w: start registry: %v", ErrHost, err)
		}
		go func() { _ = cmd.Wait() }() // reap it if this process outlives it
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: l.net.DialContext}}
	defer client.CloseIdleConnections()
	return poll(ctx, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+RegistryAddr()+"/v2/", nil)
		if err != nil {
			return false, "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, "registry at " + RegistryAddr() + ": " + err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "registry at " + RegistryAddr() + ": " + resp.Status, nil
	})
}

// pushImages pushes the archives of refs (from images) into the lab's
// running registry.
func (l *Lab) pushImages(ctx context.Context, images ImageSet, refs []string) error {
	tr := &http.Transport{DialContext: l.net.DialContext}
	defer tr.CloseIdleConnections()
	return pushImages(ctx, RegistryAddr(), tr, images, refs, l.cfg.Log)
}

// pushImages pushes the archives of refs (from images) into the registry
// at addr over plain HTTP, each to its mirrorRef. Blobs the registry
// already holds are not sent again.
func pushImages(ctx context.Context, addr string, tr http.RoundTripper, images ImageSet, refs []string, log *slog.Logger) error {
	for _, ref := range refs {
		archive, ok := images[ref]
		if !ok {
			return fmt.Errorf("%w: no image archive for %s", ErrMissing, ref)
		}
		src, err := name.NewTag(ref)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrImage, ref, err)
		}
		img, err := tarball.ImageFromPath(archive, &src)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrImage, archive, err)
		}
		dst, err := mirrorRef(addr, ref)
		if err != nil {
			return err
		}
		if err := remote.Write(dst, img, remote.WithContext(ctx), remote.WithTransport(tr)); err != nil {
			return fmt.Errorf("%w: push %s to %s: %v", ErrImage, ref, dst, err)
		}
		log.Debug("pushed image", "ref", ref, "to", dst.String())
	}
	return nil
}

// stopRegistry stops the registry, if it runs: SIGTERM, then SIGKILL.
func (l *Lab) stopRegistry(ctx context.Context) error {
	pid, ok := l.registryPID()
	if !ok {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(ctx, pid, 10*time.Second) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(ctx, pid, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("%w: registry pid %d survived SIGKILL", ErrHost, pid)
}
