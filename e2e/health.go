package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/cachedir"
)

// Health gates, failure budgets and rollback on the lab (SPEC §16,
// docs/health.md): a release whose kubelet is broken on worker hosts only,
// and the lab switch a PromQL gate reads.

// StampedKubelet is the kubelet reporting version that make deps builds
// from another release's sources (cachedir.K8sBuilds: 1.34.5 is 1.34.3's
// kubelet stamped 1.34.5).
func StampedKubelet(buildCache, version string) string {
	return filepath.Join(cachedir.K8sBin(buildCache, version), "kubelet")
}

// brokenKubeletHeader is the start of the broken release's kubelet: a
// shell script that exits at start on worker hosts (the lab's hosts are
// named after their role, and the host name is the machine's) and, on
// every other host, runs the kubelet appended after it. %09d is the byte
// offset of that kubelet, 1-based for tail -c.
const brokenKubeletHeader = `#!/bin/sh
# kubelet of molt's e2e release %s: deliberately broken on worker hosts
# (it exits at start there); elsewhere it runs the kubelet appended below.
case "$(uname -n)" in
worker-*) echo "kubelet: deliberately broken on worker hosts (molt e2e release %s)" >&2; exit 1 ;;
esac
tail -c +%09d "$0" >/run/molt-e2e-kubelet.new && chmod 755 /run/molt-e2e-kubelet.new && mv -f /run/molt-e2e-kubelet.new /run/molt-e2e-kubelet || exit 1
exec /run/molt-e2e-kubelet "$@"
`

// PublishBrokenRelease publishes and registers release version: release
// base's static-pod images, containerd and add-ons (so the control plane
// and load balancers go through it quickly and healthy), no image archives
// to import (the hosts have base's), and a kubelet that is the stamped
// kubelet (StampedKubelet(…, version)) wrapped so that it exits at
// start on worker hosts. Its sha256 is right: the agent installs it and
// finds it unhealthy.
func (e *Env) PublishBrokenRelease(ctx context.Context, base, version string) (api.Release, error) {
	artifacts := filepath.Join(e.cfg.WorkDir, "artifacts")
	rel, err := e.Lab.PublishRelease(ctx, base, artifacts, "/artifacts")
	if err != nil {
		return api.Release{}, err
	}
	stamped, err := os.Open(StampedKubelet(e.cfg.Lab.BuildCache, version))
	if err != nil {
		return api.Release{}, fmt.Errorf("the stamped kubelet (%s): %w", cachedir.K8sBuildOf(version).Command(), err)
	}
	defer stamped.Close()
	dir := filepath.Join(artifacts, "v"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return api.Release{}, err
	}
	probe := fmt.Sprintf(brokenKubeletHeader, version, version, 0)
	header := fmt.Sprintf(brokenKubeletHeader, version, version, len(probe)+1)
	tmp := filepath.Join(dir, ".kubelet.new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return api.Release{}, err
	}
	_, err = io.WriteString(f, header)
	if err == nil {
		_, err = io.Copy(f, stamped)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, "kubelet"))
	}
	if err != nil {
		return api.Release{}, err
	}
	sum, err := fileSHA256(filepath.Join(dir, "kubelet"))
	if err != nil {
		return api.Release{}, err
	}
	rel.Version = version
	rel.Channels = nil
	rel.Components.Kubelet = api.BinaryArtifact{URL: "/artifacts/v" + version + "/kubelet", SHA256: sum}
	rel.Components.Images = nil
	if _, err := e.API().Do(ctx, http.MethodPut, "/v1/releases/"+version, rel, nil); err != nil {
		return api.Release{}, fmt.Errorf("register release %s: %w", version, err)
	}
	return rel, nil
}

// SetPoolSettings registers the cluster again with pool's upgrade settings
// changed by change (the kubeconfig stored before is kept).
func (e *Env) SetPoolSettings(ctx context.Context, pool string, change func(*api.UpgradeSettings)) error {
	c, err := e.Cluster(ctx)
	if err != nil {
		return err
	}
	spec := c.Spec
	found := false
	for i := range spec.Pools {
		if spec.Pools[i].Name == pool {
			change(&spec.Pools[i].Settings)
			found = true
		}
	}
	if !found {
		return fmt.Errorf("cluster %s has no pool %s", ClusterName, pool)
	}
	_, err = e.API().Do(ctx, http.MethodPut, "/v1/clusters/"+ClusterName, spec, nil)
	return err
}

// WatchUntil follows upgrade id, printing its progress, until done says
// so or the upgrade ended.
func (e *Env) WatchUntil(ctx context.Context, id string, what string, done func(*api.Upgrade) bool) (*api.Upgrade, error) {
	p := newProgress(e.cfg.Out)
	var last *api.Upgrade
	err := poll(ctx, waitUpgradeTimeout, func() (bool, error) {
		u, err := e.Upgrade(ctx)
		if err != nil || u.ID != id {
			return false, nil
		}
		last = u
		p.show(u)
		if done(u) {
			return true, nil
		}
		if !u.InProgress {
			return false, fmt.Errorf("upgrade %s ended %s before %s: %s", u.ID, u.State, what, u.Reason)
		}
		return false, nil
	})
	if err != nil {
		return last, fmt.Errorf("%s: %w", what, err)
	}
	return last, nil
}

const waitUpgradeTimeout = 20 * time.Minute

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
