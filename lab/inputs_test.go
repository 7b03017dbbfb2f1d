package lab

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/cachedir"
)

// TestEnsureInputsReadsTheStampedRelease: 1.34.4 is 1.34.3's sources
// stamped 1.34.4 (cachedir.K8sBuilds). A build cache that still holds a
// compile of 1.34.4 from before (k8s/v1.34.4) does not serve it: the lab
// asks for the stamped build, naming the command that makes it, and takes
// it once it is there — never the old binaries, never a mix.
func TestEnsureInputsReadsTheStampedRelease(t *testing.T) {
	builds := t.TempDir()
	put := func(dir string) {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, c := range cachedir.K8sComponents {
			require.NoError(t, os.WriteFile(filepath.Join(dir, c), []byte("#!/bin/true\n"), 0o755))
		}
	}
	put(filepath.Join(builds, "k8s", "v1.34.4", "bin"))
	cfg := DefaultConfig()
	cfg.Cache, cfg.BuildCache, cfg.StateDir = t.TempDir(), builds, t.TempDir()
	l, err := New(cfg)
	require.NoError(t, err)

	_, err = l.EnsureInputs(context.Background(), "1.34.4")
	require.ErrorIs(t, err, ErrMissing)
	require.ErrorContains(t, err, filepath.Join(builds, "k8s", "v1.34.3-as-v1.34.4", "bin")+"/")
	require.ErrorContains(t, err, "build/k8s/build.sh --stamp 1.34.4 1.34.3")

	// With the stamped build there, the Kubernetes check passes and the
	// next missing build (containerd, etcd) is what it names.
	put(filepath.Join(builds, "k8s", "v1.34.3-as-v1.34.4", "bin"))
	_, err = l.EnsureInputs(context.Background(), "1.34.4")
	require.ErrorIs(t, err, ErrMissing)
	require.NotContains(t, err.Error(), "k8s/v", "the Kubernetes build is found: %v", err)
}
