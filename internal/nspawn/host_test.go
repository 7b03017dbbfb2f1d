package nspawn

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bootTestHost boots a host on the cached rootfs and stops it at cleanup.
func bootTestHost(t *testing.T) *Host {
	t.Helper()
	requireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rootfs, err := EnsureRootfs(ctx, DefaultCacheDir())
	require.NoError(t, err)
	h, err := Boot(ctx, BootConfig{Name: fmt.Sprintf("molt-nspawn-%d", os.Getpid()), Rootfs: rootfs})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Stop()) })
	return h
}

func TestBootExecCopyStop(t *testing.T) {
	h := bootTestHost(t)
	ctx := context.Background()

	out, err := h.Exec(ctx, "systemctl", "is-system-running")
	if err != nil { // degraded exits non-zero but is a booted system
		require.Contains(t, string(out), "degraded")
	}
	require.NoError(t, h.WriteFile("/opt/molt/hello", []byte("hi\n"), 0o644))
	out, err = h.Exec(ctx, "cat", "/opt/molt/hello")
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(out))

	out, err = h.Exec(ctx, "hostname")
	require.NoError(t, err)
	require.Equal(t, h.Name(), strings.TrimSpace(string(out)))

	_, err = h.Exec(ctx, "false")
	require.Error(t, err)

	require.NoError(t, h.Stop())
	require.NoError(t, h.Stop(), "second Stop is a no-op")
}

func TestBindsAreMountedReadOnlyOrWritable(t *testing.T) {
	requireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rootfs, err := EnsureRootfs(ctx, DefaultCacheDir())
	require.NoError(t, err)
	ro, rw := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(ro+"/f", []byte("ro\n"), 0o644))
	h, err := Boot(ctx, BootConfig{Name: fmt.Sprintf("molt-nspawn-binds-%d", os.Getpid()), Rootfs: rootfs,
		Binds: []string{rw + ":/opt/rw"}, BindsRO: []string{ro + ":/opt/molt/ro"}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Stop()) })

	out, err := h.Exec(ctx, "cat", "/opt/molt/ro/f")
	require.NoError(t, err)
	require.Equal(t, "ro\n", string(out))
	_, err = h.Exec(ctx, "touch", "/opt/molt/ro/g")
	require.Error(t, err, "a --bind-ro mount is read-only")
	_, err = h.Exec(ctx, "touch", "/opt/rw/g")
	require.NoError(t, err)
	require.FileExists(t, rw+"/g")
}
