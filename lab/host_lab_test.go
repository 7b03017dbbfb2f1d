//go:build lab

package lab

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moltproject/molt/internal/nspawn"
	"github.com/moltproject/molt/internal/testenv"
	"github.com/stretchr/testify/require"
)

// moduleRoot is the repository root, two levels above this package's tests.
func moduleRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	return filepath.Dir(wd)
}

func requireLabTools(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t)
	for _, b := range []string{"systemd-nspawn", "ip", "nsenter", "debootstrap", "go"} {
		testenv.RequireBinary(t, b)
	}
}

// TestNetworkAndOneHostWithContainerd boots one host in its namespace,
// starts containerd the lab's way and imports the pause image.
func TestNetworkAndOneHostWithContainerd(t *testing.T) {
	requireLabTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cache := nspawn.DefaultCacheDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	tools := filepath.Join(cache, "lab", "tools")
	require.NoError(t, BuildTools(ctx, log, moduleRoot(t), tools))
	pause := filepath.Join(cache, imagesSubdir, imageFileName(PauseImage))
	require.NoError(t, BuildImage(pause, ImageSpec{Ref: PauseImage,
		Files: []ImageFile{{filepath.Join(tools, "pause"), "/pause"}}, Entrypoint: []string{"/pause"}}))

	rootfs, err := nspawn.EnsureRootfs(ctx, cache)
	require.NoError(t, err)

	spec := HostSpec{Name: "t-host", Role: RoleWorker, IP: "10.77.0.99"}
	n := Network{Prefix: "mlabt-", Hosts: []HostSpec{spec}}
	t.Cleanup(func() { require.NoError(t, n.Down(context.Background())) })
	require.NoError(t, n.Up(ctx))
	require.NoError(t, n.Up(ctx), "Up is idempotent")

	h, err := bootHost(ctx, rootfs, n.HostNS(spec.Name), hostInputs{spec: spec, consoles: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() {
		if rh, ok := findHost(spec.Name, n.HostNS(spec.Name)); ok {
			require.NoError(t, stopHost(context.Background(), rh, 30*time.Second))
		}
	})

	out, err := h.Exec(ctx, "ip", "-4", "-o", "addr", "show", "eth0")
	require.NoError(t, err)
	require.Contains(t, string(out), "10.77.0.99/24")

	_, err = h.Exec(ctx, "sh", "-ec", `for c in /sys/fs/cgroup/*/; do mount -o remount,bind,rw "$c" 2>/dev/null || true; done
mkdir -p /var/lib/containerd; mount -t tmpfs tmpfs /var/lib/containerd
systemctl start containerd; for i in $(seq 100); do ctr version >/dev/null 2>&1 && exit 0; sleep 0.1; done; exit 1`)
	require.NoError(t, err)
	require.NoError(t, importImage(ctx, h, pause))
	out, err = h.Exec(ctx, "ctr", "-n", ContainerdNamespace, "images", "ls", "-q")
	require.NoError(t, err)
	require.Contains(t, strings.Fields(string(out)), PauseImage)

	rh, ok := findHost(spec.Name, n.HostNS(spec.Name))
	require.True(t, ok)
	require.Equal(t, h.PID, rh.initPID)
	require.True(t, nspawn.IsNamespaceInit(rh.initPID))
}
