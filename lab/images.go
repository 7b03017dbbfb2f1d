package lab

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image references the lab's static pods use. They are the upstream names,
// so manifests look like kubeadm's, but every image is built here from a
// local binary and imported into containerd: nothing is ever pulled.
const (
	PauseImage   = "registry.k8s.io/pause:3.10.1"
	CPLBImage    = "molt.local/lab/cplb:v1"
	EchoImage    = "molt.local/lab/echo:v1"
	imagesSubdir = "lab/images"
)

// EtcdVersionFor is the etcd release the lab pairs with a Kubernetes
// version, as kubeadm does (its SupportedEtcdVersion table): 3.5 up to
// 1.33, 3.6 from 1.34 on, so the lab's minor upgrade moves etcd 3.5 → 3.6
// with the rest of the control plane. 3.5.21 is at or above the 3.5.20
// etcd's 3.6 upgrade guide asks for before moving to 3.6 (docs/etcd.md).
func EtcdVersionFor(version string) string {
	parts := strings.Split(strings.TrimPrefix(version, "v"), ".")
	if minor, err := strconv.Atoi(parts[min(1, len(parts)-1)]); err == nil && parts[0] == "1" && minor <= 33 {
		return "3.5.21"
	}
	return "3.6.4"
}

// EtcdImage is the reference of the etcd image the lab pairs with a
// Kubernetes version (registry.k8s.io/etcd:3.6.4-0, kubeadm's tag form).
func EtcdImage(version string) string {
	return "registry.k8s.io/etcd:" + EtcdVersionFor(version) + "-0"
}

// ComponentImage is the reference of a control-plane component's image
// for a Kubernetes version ("1.34.4" or "v1.34.4").
func ComponentImage(component, version string) string {
	return "registry.k8s.io/" + component + ":v" + strings.TrimPrefix(version, "v")
}

// ImageFile is one file placed into an image's only layer.
type ImageFile struct {
	// Src is the file on this machine.
	Src string
	// Path is where it lands in the image, absolute.
	Path string
}

// ImageSpec describes a single-layer image on an empty (scratch) base:
// the lab's binaries are static, so they need nothing else.
type ImageSpec struct {
	Ref        string
	Files      []ImageFile
	Entrypoint []string
	// Env is the image's environment; empty means
	// PATH=/usr/local/bin:/usr/bin:/bin.
	Env []string
	// StopSignal, when set, is the signal the runtime stops the container
	// with instead of SIGTERM (the image config's StopSignal, which
	// containerd's CRI honours).
	StopSignal string
}

// BuildImage writes spec as a docker-archive tarball at dst, the format
// `ctr images import` and containerd's client Import accept.
func BuildImage(dst string, spec ImageSpec) error {
	tag, err := name.NewTag(spec.Ref)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrImage, spec.Ref, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return layerTar(spec.Files), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching)
	if err != nil {
		return fmt.Errorf("%w: %s layer: %v", ErrImage, spec.Ref, err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrImage, spec.Ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrImage, spec.Ref, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = spec.Entrypoint
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if len(spec.Env) > 0 {
		cf.Config.Env = spec.Env
	}
	cf.Config.StopSignal = spec.StopSignal
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrImage, spec.Ref, err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("%w: %v", ErrImage, err)
	}
	tmp := dst + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("%w: write %s: %v", ErrImage, spec.Ref, err)
	}
	return os.Rename(tmp, dst)
}

// layerTar streams an uncompressed tar of files, with their parent
// directories and an empty /tmp (some components write temp files).
func layerTar(files []ImageFile) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		dirs := map[string]bool{}
		addDir := func(d string) error {
			var parts []string
			for d != "/" && d != "." && !dirs[d] {
				parts = append([]string{d}, parts...)
				d = path.Dir(d)
			}
			for _, p := range parts {
				dirs[p] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(p, "/") + "/", Mode: 0o755}); err != nil {
					return err
				}
			}
			return nil
		}
		err := addDir("/tmp")
		for _, f := range files {
			if err != nil {
				break
			}
			if err = addDir(path.Dir(f.Path)); err != nil {
				break
			}
			err = addFile(tw, f)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

func addFile(tw *tar.Writer, f ImageFile) error {
	in, err := os.Open(f.Src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: 0o755, Size: st.Size()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}

// ImageSet is what EnsureImages built: image reference → tarball path.
type ImageSet map[string]string

// ImageSources says where the binaries for the lab's images come from.
type ImageSources struct {
	// Cache is ${MOLT_CACHE}; tarballs go to Cache/lab/images.
	Cache string
	// K8sBinDir holds kube-apiserver, kube-controller-manager,
	// kube-scheduler and kube-proxy.
	K8sBinDir string
	// Version is the Kubernetes version of those binaries.
	Version string
	// EtcdBinary is a static etcd binary of EtcdVersionFor(Version).
	EtcdBinary string
	// CoreDNSBinary is build/coredns's static CoreDNS.
	CoreDNSBinary string
	// ToolsDir holds the lab's own static binaries (pause, cplb, echo).
	ToolsDir string
	// Rootfs is the hosts' Debian tree; the data-plane LB image is its
	// HAProxy binary with the libraries it loads, kube-proxy's image holds
	// its nft with the libraries nft loads.
	Rootfs string
}

// EnsureImages builds every image tarball the lab needs, skipping those
// already in the cache and newer than their binaries.
func EnsureImages(log *slog.Logger, src ImageSources) (ImageSet, error) {
	dir := filepath.Join(src.Cache, imagesSubdir)
	specs := []ImageSpec{
		{Ref: PauseImage, Files: []ImageFile{{filepath.Join(src.ToolsDir, "pause"), "/pause"}}, Entrypoint: []string{"/pause"}},
		{Ref: CPLBImage, Files: []ImageFile{{filepath.Join(src.ToolsDir, "cplb"), "/usr/local/bin/cplb"}}, Entrypoint: []string{"/usr/local/bin/cplb"}},
		{Ref: EchoImage, Files: []ImageFile{{filepath.Join(src.ToolsDir, "echo"), "/usr/local/bin/echo"}}, Entrypoint: []string{"/usr/local/bin/echo"}},
		{Ref: EtcdImage(src.Version), Files: []ImageFile{{src.EtcdBinary, "/usr/local/bin/etcd"}}, Entrypoint: []string{"/usr/local/bin/etcd"}},
	}
	haproxy, err := binaryWithLibs(src.Rootfs, haproxyBinary)
	if err != nil {
		return nil, err
	}
	specs = append(specs, ImageSpec{Ref: HAProxyImage, Files: haproxy, Entrypoint: []string{haproxyBinary}, StopSignal: haproxyStopSignal})
	proxy, err := kubeProxyImageSpec(src.Version, src.K8sBinDir, src.Rootfs)
	if err != nil {
		return nil, err
	}
	specs = append(specs, proxy, coreDNSImageSpec(src.CoreDNSBinary))
	for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		specs = append(specs, ImageSpec{
			Ref:        ComponentImage(c, src.Version),
			Files:      []ImageFile{{filepath.Join(src.K8sBinDir, c), "/usr/local/bin/" + c}},
			Entrypoint: []string{"/usr/local/bin/" + c},
		})
	}
	set := ImageSet{}
	for _, s := range specs {
		dst := filepath.Join(dir, imageFileName(s.Ref))
		set[s.Ref] = dst
		if fresh(dst, s) {
			continue
		}
		log.Info("building image", "ref", s.Ref, "tarball", dst)
		if err := BuildImage(dst, s); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst+".spec", []byte(specKey(s)), 0o644); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrImage, err)
		}
	}
	return set, nil
}

// imageFileName maps a reference to a file name: "/" and ":" become "_".
func imageFileName(ref string) string {
	return strings.NewReplacer("/", "_", ":", "_").Replace(ref) + ".tar"
}

// fresh reports whether the tarball dst was built from spec as it is now:
// the spec it was built from (dst.spec, specKey) is the same — the same
// files from the same places, so a rootfs of other packages or a file
// added to an image makes it stale — and it is newer than every source
// file.
func fresh(dst string, spec ImageSpec) bool {
	st, err := os.Stat(dst)
	if err != nil {
		return false
	}
	if b, err := os.ReadFile(dst + ".spec"); err != nil || string(b) != specKey(spec) {
		return false
	}
	for _, f := range spec.Files {
		fs, err := os.Stat(f.Src)
		if err != nil || fs.ModTime().After(st.ModTime()) {
			return false
		}
	}
	return true
}

// specKey is what an image tarball is built from, as text: reference,
// entrypoint, environment, and every file's source and path.
func specKey(s ImageSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ref %s\nentrypoint %q\nenv %q\n", s.Ref, s.Entrypoint, s.Env)
	if s.StopSignal != "" {
		fmt.Fprintf(&b, "stopsignal %s\n", s.StopSignal)
	}
	for _, f := range s.Files {
		fmt.Fprintf(&b, "file %s %s\n", f.Src, f.Path)
	}
	return b.String()
}

// labTools are the lab's own programs under lab/tools: the pause process,
// the control-plane TCP load balancer, the echo server of the sample
// workloads, and the image registry the hosts pull add-on images from.
var labTools = []string{"pause", "cplb", "echo", registryTool}

// BuildTools compiles the lab's own static helper binaries (labTools) from
// this module into dir.
func BuildTools(ctx context.Context, log *slog.Logger, moduleDir, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: %v", ErrImage, err)
	}
	for _, t := range labTools {
		out := filepath.Join(dir, t)
		pkg := "./lab/tools/" + t
		log.Debug("building tool", "pkg", pkg, "out", out)
		tmp := out + ".new"
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp, pkg)
		cmd.Dir = moduleDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: go build %s: %v: %s", ErrImage, pkg, err, b)
		}
		// Keep the old file (and its mtime) when nothing changed, so the
		// images built from it stay fresh in the cache.
		if same(tmp, out) {
			_ = os.Remove(tmp)
			continue
		}
		if err := os.Rename(tmp, out); err != nil {
			return fmt.Errorf("%w: %v", ErrImage, err)
		}
	}
	return nil
}

func same(a, b string) bool {
	x, err := os.ReadFile(a)
	if err != nil {
		return false
	}
	y, err := os.ReadFile(b)
	return err == nil && bytes.Equal(x, y)
}
