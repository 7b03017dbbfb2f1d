package lab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRaiseInotifyLimits raises a limit below its minimum and leaves one
// above it alone (the lab never lowers a kernel limit).
func TestRaiseInotifyLimits(t *testing.T) {
	dir := t.TempDir()
	low, high := filepath.Join(dir, "instances"), filepath.Join(dir, "watches")
	require.NoError(t, os.WriteFile(low, []byte("128\n"), 0o644))
	require.NoError(t, os.WriteFile(high, []byte("1048576\n"), 0o644))
	saved := inotifyLimits
	t.Cleanup(func() { inotifyLimits = saved })
	inotifyLimits = []struct {
		path string
		min  int
	}{{low, 8192}, {high, 524288}}

	changed, err := raiseInotifyLimits()
	require.NoError(t, err)
	require.Len(t, changed, 1)
	b, _ := os.ReadFile(low)
	require.Equal(t, "8192", string(b))
	b, _ = os.ReadFile(high)
	require.Equal(t, "1048576\n", string(b), "a higher limit is kept")

	changed, err = raiseInotifyLimits()
	require.NoError(t, err)
	require.Empty(t, changed, "nothing to do the second time")
}
