package nspawn

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/testenv"
)

// requireTools fails under CI (skips locally) when the host-booting tools
// are missing.
func requireTools(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t)
	for _, b := range []string{"debootstrap", "systemd-nspawn", "nsenter", "chroot"} {
		testenv.RequireBinary(t, b)
	}
}

func TestEnsureRootfsIsCachedAndIdempotent(t *testing.T) {
	requireTools(t)
	ctx := context.Background()
	dir, err := EnsureRootfs(ctx, DefaultCacheDir())
	require.NoError(t, err)
	require.FileExists(t, dir+"/usr/bin/containerd")
	require.FileExists(t, dir+"/usr/lib/cni/bridge", "containernetworking-plugins")
	require.FileExists(t, dir+"/usr/sbin/nft", "nftables, for the lab's kube-proxy image")
	require.FileExists(t, dir+"/usr/sbin/policy-rc.d")
	require.NoFileExists(t, dir+"/etc/hostname")
	again, err := EnsureRootfs(ctx, DefaultCacheDir())
	require.NoError(t, err)
	require.Equal(t, dir, again)
}
