package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/nspawn"
)

// Inputs are the files a lab host at one release is made from: the
// Kubernetes and etcd builds (BuildCache), and what the lab makes of them
// in its own Cache — its tools, the image archives and the host rootfs.
type Inputs struct {
	// Version is the Kubernetes release ("1.34.4").
	Version string
	// K8sBin holds kubelet, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kube-proxy of Version: cachedir.K8sBin, where
	// make deps builds it (compiled, or another release's sources stamped
	// Version; cachedir.K8sBuilds is the table).
	K8sBin string
	// Etcd is the static etcd binary the release pairs with (EtcdVersionFor).
	Etcd string
	// CoreDNS is build/coredns's binary (CoreDNSVersion, for every release).
	CoreDNS string
	// Tools holds the lab's own static binaries (pause, cplb, echo, registry).
	Tools string
	// Images maps every image reference the lab imports to its archive.
	Images ImageSet
	// Rootfs is the shared Debian rootfs every host boots from.
	Rootfs string
	// Containerd is the containerd daemon the release ships; ContainerdBuilt
	// says it is build/containerd's rather than the rootfs's own (Debian's),
	// so a host at this release gets it copied over the rootfs's.
	Containerd      string
	ContainerdBuilt bool
}

// EnsureInputs is the one way to get what a lab at version needs. It checks
// the Kubernetes and etcd builds (naming the command that makes a missing
// one: they take minutes and belong to `make deps`), then builds whatever
// the lab makes itself and is missing or stale — tools, images, rootfs —
// so every entry point (Up, PublishRelease, the demo, the end-to-end tests)
// works from an empty lab cache. Repeated calls for a version are cheap:
// the tools are built once per Lab and images and rootfs are cached.
func (l *Lab) EnsureInputs(ctx context.Context, version string) (Inputs, error) {
	c := l.cfg
	version = strings.TrimPrefix(version, "v")
	in := Inputs{
		Version: version,
		K8sBin:  cachedir.K8sBin(c.BuildCache, version),
		Etcd:    filepath.Join(c.BuildCache, "etcd", "v"+EtcdVersionFor(version), "bin", "etcd"),
		CoreDNS: filepath.Join(c.BuildCache, "coredns", "v"+CoreDNSVersion, "bin", "coredns"),
		Tools:   filepath.Join(c.Cache, "lab", "tools"),
	}
	for _, b := range cachedir.K8sComponents {
		if p := filepath.Join(in.K8sBin, b); !exists(p) {
			return Inputs{}, fmt.Errorf("%w: %s (build it: %s, or make deps)", ErrMissing, p, cachedir.K8sBuildOf(version).Command())
		}
	}
	// Fails now, before minutes of image and rootfs work, when the release
	// needs build/containerd's daemon and it is not built.
	if _, _, err := containerdFor(c.BuildCache, "", version); err != nil {
		return Inputs{}, err
	}
	if !exists(in.Etcd) {
		return Inputs{}, fmt.Errorf("%w: %s (build it: build/k8s/etcd.sh %s, or make deps)", ErrMissing, in.Etcd, EtcdVersionFor(version))
	}
	if !exists(in.CoreDNS) {
		return Inputs{}, fmt.Errorf("%w: %s (build it: build/coredns/build.sh %s, or make deps)", ErrMissing, in.CoreDNS, CoreDNSVersion)
	}

	l.inputsMu.Lock()
	defer l.inputsMu.Unlock()
	if in, ok := l.inputs[version]; ok {
		return in, nil
	}
	if !l.toolsBuilt {
		l.step("building lab tools (%s) into %s", strings.Join(labTools, ", "), in.Tools)
		if err := BuildTools(ctx, c.Log, c.ModuleDir, in.Tools); err != nil {
			return Inputs{}, err
		}
		l.toolsBuilt = true
	}
	if !exists(filepath.Join(c.Cache, "rootfs")) {
		l.step("host rootfs: Debian bookworm with systemd, containerd, HAProxy and nftables (debootstrap, about a minute, once) under %s", filepath.Join(c.Cache, "rootfs"))
	}
	var err error
	if in.Rootfs, err = nspawn.EnsureRootfs(ctx, c.Cache); err != nil {
		return Inputs{}, fmt.Errorf("%w: %w", ErrHost, err)
	}
	l.step("images for v%s under %s", version, filepath.Join(c.Cache, imagesSubdir))
	images, err := EnsureImages(c.Log, ImageSources{Cache: c.Cache, K8sBinDir: in.K8sBin, Version: version, EtcdBinary: in.Etcd, CoreDNSBinary: in.CoreDNS, ToolsDir: in.Tools, Rootfs: in.Rootfs})
	if err != nil {
		return Inputs{}, err
	}
	in.Images = images
	if in.Containerd, in.ContainerdBuilt, err = containerdFor(c.BuildCache, in.Rootfs, version); err != nil {
		return Inputs{}, err
	}
	if l.inputs == nil {
		l.inputs = map[string]Inputs{}
	}
	l.inputs[version] = in
	return in, nil
}
