package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/moltproject/molt/api"
)

// ErrPodsNotReady means the new static pods did not run in time; the
// previous manifests were restored.
var ErrPodsNotReady = errors.New("static pods not running")

// expectedPod is a container the kubelet must run for a manifest.
type expectedPod struct {
	name  string // metadata.name; the mirror pod is name-<node>
	image string
}

// manifestPods parses a pod manifest for its name and container images.
func manifestPods(file, content string) ([]expectedPod, error) {
	var m struct {
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			Containers []struct {
				Image string `yaml:"image"`
			} `yaml:"containers"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal([]byte(content), &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", file, err)
	}
	if m.Metadata.Name == "" || len(m.Spec.Containers) == 0 {
		return nil, fmt.Errorf("manifest %s: metadata.name and spec.containers are required", file)
	}
	out := make([]expectedPod, 0, len(m.Spec.Containers))
	for _, c := range m.Spec.Containers {
		out = append(out, expectedPod{name: m.Metadata.Name, image: c.Image})
	}
	return out, nil
}

// validManifestName refuses names that would escape the manifest directory
// or that the kubelet would ignore.
func validManifestName(n string) bool {
	return n != "" && n == filepath.Base(n) && !strings.HasPrefix(n, ".") &&
		(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") || strings.HasSuffix(n, ".json"))
}

// upgradeStaticPods backs up the manifest directory (once), writes the new
// manifests atomically and waits until the kubelet runs the new pods; on
// timeout it restores the backup, as kubeadm does.
func (r *run) upgradeStaticPods(ctx context.Context) (map[string]string, error) {
	a := r.a
	u := r.op.UpgradeStaticPods
	dir := a.path(a.cfg.ManifestDir)
	backup := a.dataPath("backups", r.op.ID)
	details := map[string]string{"version": u.Version, "backup": backup}

	manifests := u.Manifests
	if len(u.Images) > 0 {
		// Rewrite this host's own manifests. Before the backup the directory
		// still holds the originals; after it, the backup does, so a resumed
		// operation computes exactly the same files.
		src := dir
		if r.done(StepBackedUp) {
			src = backup
		}
		rewritten, err := imageManifests(src, u.Images)
		if err != nil {
			return details, fmt.Errorf("%w: %w", ErrUnknownOperation, err)
		}
		for name, content := range u.Manifests {
			rewritten[name] = content // explicit manifests win
		}
		manifests = rewritten
		if len(manifests) == 0 {
			details["manifests"] = ""
			details["note"] = "no static pod on this host runs any of the containers"
			return details, r.mark(ctx, StepHealthy, nil)
		}
	}
	var want, etcdWant []expectedPod
	names := make([]string, 0, len(manifests))
	var etcdNames []string
	for name, content := range manifests {
		if !validManifestName(name) {
			return details, fmt.Errorf("%w: manifest name %q", ErrUnknownOperation, name)
		}
		pods, err := manifestPods(name, content)
		if err != nil {
			return details, fmt.Errorf("%w: %w", ErrUnknownOperation, err)
		}
		want = append(want, pods...)
		names = append(names, name)
		if pods[0].name == etcdPodName {
			etcdNames = append(etcdNames, name)
			etcdWant = append(etcdWant, pods...)
		}
	}
	slices.Sort(names)
	slices.Sort(etcdNames)
	if r.done(StepRestoring) {
		return details, r.restoreManifests(ctx, dir, backup, "pods were not running before the agent restarted")
	}
	if !r.done(StepBackedUp) {
		if err := backupDir(dir, backup); err != nil {
			return details, fmt.Errorf("back up %s: %w", dir, err)
		}
		if err := r.mark(ctx, StepBackedUp, nil); err != nil {
			return details, err
		}
	}
	timeout := a.cfg.StaticPodTimeout
	if u.TimeoutSeconds > 0 {
		timeout = time.Duration(u.TimeoutSeconds) * time.Second
	}
	if len(etcdNames) > 0 {
		// etcd first, as kubeadm does: the API servers of the new release
		// may need the new etcd, and the other components move only once
		// the etcd cluster is whole again.
		if err := r.upgradeEtcd(ctx, dir, backup, etcdNames, manifests, etcdWant, timeout, details); err != nil {
			return details, err
		}
	}
	if !r.done(StepWritten) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return details, err
		}
		for _, name := range names {
			if slices.Contains(etcdNames, name) {
				continue // written and gated above
			}
			if err := writeFileAtomic(filepath.Join(dir, name), []byte(manifests[name]), 0o600); err != nil {
				return details, r.failAndRestoreManifests(ctx, dir, backup, fmt.Errorf("write %s: %w", name, err))
			}
		}
		if err := r.mark(ctx, StepWritten, nil); err != nil {
			return details, err
		}
	}
	if err := a.waitPods(ctx, want, timeout); err != nil {
		return details, r.failAndRestoreManifests(ctx, dir, backup, err)
	}
	details["manifests"] = strings.Join(names, ",")
	return details, r.mark(ctx, StepHealthy, nil)
}

// waitPods polls the observer until every expected container runs with
// its expected image.
func (a *Agent) waitPods(ctx context.Context, want []expectedPod, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	missing := ""
	for {
		pods, err := a.pods.StaticPods(ctx)
		if err == nil {
			missing = ""
			for _, w := range want {
				if !slices.ContainsFunc(pods, func(p api.StaticPodStatus) bool {
					return (p.Name == w.name || p.Name == w.name+"-"+a.cfg.Node) && p.Image == w.image && p.Ready
				}) {
					missing = w.name + " (" + w.image + ")"
					break
				}
			}
			if missing == "" {
				return nil
			}
		} else {
			missing = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w after %s: waiting for %s", ErrPodsNotReady, timeout, missing)
		case <-time.After(250 * time.Millisecond): // a probe interval, not synchronisation
		}
	}
}

func (r *run) failAndRestoreManifests(ctx context.Context, dir, backup string, cause error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := r.mark(ctx, StepRestoring, map[string]string{"cause": cause.Error()}); err != nil {
		return err
	}
	return r.restoreManifests(ctx, dir, backup, cause.Error())
}

// restoreManifests makes dir hold exactly the backup's files again, but
// for etcd's manifest once the new etcd ran (keptEtcdManifests).
// Idempotent: every write is atomic and removals of absent files are fine.
func (r *run) restoreManifests(ctx context.Context, dir, backup, cause string) error {
	if keep := keptEtcdManifests(r.st); len(keep) > 0 {
		cause += "; etcd stays at " + r.st.Data["etcdManifests"] + "'s new version (docs/etcd.md)"
	}
	if err := restoreDir(backup, dir, keptEtcdManifests(r.st)...); err != nil {
		return fmt.Errorf("%w: %s; restoring the previous manifests failed: %w", ErrPodsNotReady, cause, err)
	}
	if err := r.mark(ctx, StepRestored, nil); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s; previous manifests restored", ErrPodsNotReady, cause)
}

// backupDir copies the regular, non-hidden files of dir into backup,
// built under a temp name and renamed, so a backup that exists is whole.
func backupDir(dir, backup string) error {
	tmp := backup + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if err := copyFileAtomic(filepath.Join(dir, e.Name()), filepath.Join(tmp, e.Name())); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(backup); err != nil {
		return err
	}
	if err := os.Rename(tmp, backup); err != nil {
		return err
	}
	return syncDir(filepath.Dir(backup))
}

// restoreDir makes dir's non-hidden regular files equal to backup's, but
// for the files named in except, which stay as dir has them.
func restoreDir(backup, dir string, except ...string) error {
	keep := map[string]bool{}
	for _, n := range except {
		keep[n] = true
	}
	entries, err := os.ReadDir(backup)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if keep[e.Name()] {
			continue
		}
		keep[e.Name()] = true
		if err := copyFileAtomic(filepath.Join(backup, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	cur, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range cur {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") && !keep[e.Name()] {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return syncDir(dir)
}
