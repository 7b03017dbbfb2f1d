package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDataDirIsMade0700OnEveryStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, ensureDataDir(dir))
	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "created 0700")

	// An existing directory someone opened up is closed again.
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, ensureDataDir(dir))
	st, err = os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "existing directory made 0700")
}
