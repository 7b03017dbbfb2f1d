package lab

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestContainerdForPicksDebiansBeforeTheMinorAndTheBuildFromIt(t *testing.T) {
	cache, rootfs := t.TempDir(), t.TempDir()
	p, built, err := containerdFor(cache, rootfs, "1.33.13")
	require.NoError(t, err)
	require.False(t, built)
	require.Equal(t, filepath.Join(rootfs, "usr/bin/containerd"), p)

	_, _, err = containerdFor(cache, rootfs, "v1.34.3")
	require.True(t, errors.Is(err, ErrMissing), "a missing build names itself: %v", err)
	require.ErrorContains(t, err, "build/containerd/build.sh "+BuiltContainerdVersion)

	want := filepath.Join(cache, "containerd", "v"+BuiltContainerdVersion, "bin", "containerd")
	require.NoError(t, os.MkdirAll(filepath.Dir(want), 0o755))
	require.NoError(t, os.WriteFile(want, []byte("#!/bin/true\n"), 0o755))
	p, built, err = containerdFor(cache, rootfs, "1.34.4")
	require.NoError(t, err)
	require.True(t, built)
	require.Equal(t, want, p)

	_, _, err = containerdFor(cache, rootfs, "1.34")
	require.True(t, errors.Is(err, ErrMissing), "%v", err)
}

func TestServerVersionReadsTheServerSection(t *testing.T) {
	out := "Client:\n  Version:  1.6.20~ds1\n  Revision: 1.6.20~ds1-1+deb12u3\n  Go version: go1.19.8\n\nServer:\n  Version:  1.7.35\n  Revision: \n  UUID: 0b1c\n"
	v, ok := serverVersion(out)
	require.True(t, ok)
	require.Equal(t, "1.7.35", v)
	_, ok = serverVersion("Client:\n  Version:  1.6.20~ds1\n")
	require.False(t, ok, "no server section")
}

// make deps builds the containerd the lab's releases ship.
func TestDepsBuildTheContainerdTheLabShips(t *testing.T) {
	b, err := os.ReadFile("../scripts/install-deps.sh")
	require.NoError(t, err)
	require.Contains(t, string(b), "\nCONTAINERD_VERSION="+BuiltContainerdVersion+"\n")
}
