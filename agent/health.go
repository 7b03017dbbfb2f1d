package agent

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moltproject/molt/api"
)

// probeTimeout bounds each health probe so a hung component cannot stall
// the heartbeat.
const probeTimeout = 3 * time.Second

// Health samples the host: kubelet and containerd health and versions,
// static pods, free disk and the last finished operation.
func (a *Agent) Health(ctx context.Context) api.AgentHealth {
	h := api.AgentHealth{
		Cluster: a.cfg.Cluster, Node: a.cfg.Node, AgentVersion: a.cfg.Version,
		LastOperation: a.journal.last(),
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); h.Kubelet = a.kubeletHealth(ctx) }()
	go func() { defer wg.Done(); h.Containerd = a.containerdHealth(ctx) }()
	go func() {
		defer wg.Done()
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		if pods, err := a.pods.StaticPods(pctx); err == nil {
			h.StaticPods = pods
		}
	}()
	wg.Wait()
	seen := map[string]bool{}
	for _, p := range []string{a.cfg.DataDir, a.cfg.ManifestDir, filepath.Dir(a.cfg.KubeletBin), "/var/lib/containerd"} {
		if seen[p] {
			continue
		}
		seen[p] = true
		var st syscall.Statfs_t
		if syscall.Statfs(a.path(p), &st) == nil {
			h.Disk = append(h.Disk, api.DiskFree{Path: p, FreeBytes: st.Bavail * uint64(st.Bsize)})
		}
	}
	return h
}

// kubeletHealth probes /healthz and reads the installed binary's version.
func (a *Agent) kubeletHealth(ctx context.Context) api.ComponentHealth {
	h := api.ComponentHealth{Version: a.kubeletVersion(ctx)}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.cfg.KubeletHealthz, nil)
	if err != nil {
		h.Message = err.Error()
		return h
	}
	resp, err := a.http.Do(req)
	if err != nil {
		h.Message = err.Error()
		return h
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.Message = "healthz: " + resp.Status
		return h
	}
	h.Healthy = true
	return h
}

// containerdHealth asks containerd's API for its version.
func (a *Agent) containerdHealth(ctx context.Context) api.ComponentHealth {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	v, err := a.runtime.Version(ctx)
	if err != nil {
		return api.ComponentHealth{Message: err.Error()}
	}
	return api.ComponentHealth{Healthy: true, Version: v}
}

// versionCache remembers `kubelet --version` per binary identity, so the
// binary is executed once per install, not on every heartbeat.
type versionCache struct {
	key     string
	version string
}

func (a *Agent) kubeletVersion(ctx context.Context) string {
	bin := a.path(a.cfg.KubeletBin)
	fi, err := os.Stat(bin)
	if err != nil {
		return ""
	}
	key := fmt.Sprintf("%d/%d/%d", fi.Size(), fi.ModTime().UnixNano(), inode(fi))
	a.mu.Lock()
	if a.verCache.key == key {
		v := a.verCache.version
		a.mu.Unlock()
		return v
	}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return ""
	}
	// "Kubernetes v1.34.4" → "v1.34.4"
	f := strings.Fields(string(out))
	v := ""
	if len(f) > 0 {
		v = f[len(f)-1]
	}
	a.mu.Lock()
	a.verCache = versionCache{key: key, version: v}
	a.mu.Unlock()
	return v
}

func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
