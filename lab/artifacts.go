package lab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/moltproject/molt/api"
)

// ControlPlaneComponents are the Kubernetes control-plane static pods a
// release moves to new images, each tagged with the release's version.
// etcd has its own version (EtcdVersionFor); PublishRelease adds it.
var ControlPlaneComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// PublishRelease puts release version's host artifacts into dir — the
// kubelet and containerd binaries and one image archive per control-plane
// component and one of the etcd the release pairs with, under
// dir/v<version>/ — and returns the release catalog entry that points at
// them with their sha256 and carries the release's add-ons (Addons).
// urlPrefix starts every URL: "/artifacts" makes them paths on the
// coordinator (which serves dir read-only at /artifacts/, and which each
// agent resolves against the members it knows), or an absolute http(s)
// base for a separate artifact server.
//
// The lab's image archives are built (or reused from the cache) exactly as
// for `up`; files already published with the same size are kept, so a
// second call copies nothing.
func (l *Lab) PublishRelease(ctx context.Context, version, dir, urlPrefix string) (api.Release, error) {
	version = strings.TrimPrefix(version, "v")
	in, err := l.EnsureInputs(ctx, version)
	if err != nil {
		return api.Release{}, err
	}
	images := in.Images
	sub := "v" + version
	if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
		return api.Release{}, fmt.Errorf("%w: %v", ErrMissing, err)
	}
	prefix := strings.TrimRight(urlPrefix, "/") + "/" + sub + "/"
	rel := api.Release{
		Version:    version,
		Channels:   []string{"regular"},
		Components: api.ReleaseComponents{StaticPods: map[string]string{}},
	}
	sum, err := publish(filepath.Join(in.K8sBin, "kubelet"), filepath.Join(dir, sub, "kubelet"))
	if err != nil {
		return api.Release{}, err
	}
	rel.Components.Kubelet = api.BinaryArtifact{URL: prefix + "kubelet", SHA256: sum}
	// containerd: Debian's (the rootfs's) for 1.33, build/containerd's 1.7
	// from 1.34 on (containerdFor), so the minor upgrade replaces it.
	out, err := exec.CommandContext(ctx, in.Containerd, "--version").Output()
	fields := strings.Fields(string(out))
	if err != nil || len(fields) < 3 {
		return api.Release{}, fmt.Errorf("%w: %s --version: %v %q", ErrMissing, in.Containerd, err, out)
	}
	if sum, err = publish(in.Containerd, filepath.Join(dir, sub, "containerd")); err != nil {
		return api.Release{}, err
	}
	rel.Components.Containerd = api.BinaryArtifact{URL: prefix + "containerd", SHA256: sum, Version: fields[2]}
	for _, comp := range ControlPlaneComponents {
		ref := ComponentImage(comp, version)
		name := comp + ".tar"
		sum, err := publish(images[ref], filepath.Join(dir, sub, name))
		if err != nil {
			return api.Release{}, err
		}
		rel.Components.Images = append(rel.Components.Images, api.ImageArchive{URL: prefix + name, SHA256: sum})
		rel.Components.StaticPods[comp] = ref
	}
	// etcd as kubeadm pairs it with the release (EtcdVersionFor): the
	// control-plane step moves it first on each node (agent, etcd gate).
	etcdRef := EtcdImage(version)
	if sum, err = publish(images[etcdRef], filepath.Join(dir, sub, "etcd.tar")); err != nil {
		return api.Release{}, err
	}
	rel.Components.Images = append(rel.Components.Images, api.ImageArchive{URL: prefix + "etcd.tar", SHA256: sum})
	rel.Components.StaticPods["etcd"] = etcdRef
	// The add-ons' manifests go into the catalog entry; their images into
	// the lab registry, now if it runs, else when Up starts it.
	if rel.Components.Addons, err = Addons(version, l.cfg.Topology.APIEndpoint()); err != nil {
		return api.Release{}, err
	}
	if _, running := l.registryPID(); running {
		if err := l.pushImages(ctx, images, addonImages(version)); err != nil {
			return api.Release{}, err
		}
	}
	return rel, nil
}

// publish copies src to dst (through a temporary file and a rename, so a
// server never serves half a file) unless dst already has src's size, and
// returns dst's sha256.
func publish(src, dst string) (string, error) {
	si, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrMissing, err)
	}
	if di, err := os.Stat(dst); err != nil || di.Size() != si.Size() || di.ModTime().Before(si.ModTime()) {
		if err := copyFile(src, dst+".new"); err != nil {
			return "", err
		}
		if err := os.Rename(dst+".new", dst); err != nil {
			return "", fmt.Errorf("%w: %v", ErrMissing, err)
		}
	}
	f, err := os.Open(dst)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrMissing, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrMissing, dst, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMissing, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMissing, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("%w: copy %s: %v", ErrMissing, src, err)
	}
	return out.Close()
}
