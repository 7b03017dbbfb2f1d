package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/testenv"
)

// TestUpgradeBinaryDiskFull puts the binary directory on a 256 KiB tmpfs
// and offers a 1 MiB binary: the download fails with ENOSPC before any
// change, and nothing partial is left behind.
func TestUpgradeBinaryDiskFull(t *testing.T) {
	testenv.RequireRoot(t)
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	dir := filepath.Dir(h.kubelet())
	old, err := os.ReadFile(h.kubelet())
	require.NoError(t, err)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		testenv.Missing(t, "mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	require.NoError(t, os.WriteFile(h.kubelet(), old, 0o755))

	big := append(kubeletScript("v1.34.0", false), bytes.Repeat([]byte("#"), 1<<20)...)
	url, sum := h.serve("kubelet-big", big)
	_, _ = runAgent(t, h.cfg)
	coord.enqueue(upgradeOp("full", url, sum, "v1.34.0"))
	res := coord.waitResult(t, "full")
	require.Equal(t, api.OpFailed, res.State)
	require.Contains(t, res.Message, "no space left on device")
	require.Equal(t, sumOf(old), sha(t, h.kubelet()))
	require.Equal(t, 0, h.restartCount("kubelet.service"))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the untouched kubelet remains")
}
