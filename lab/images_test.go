package lab

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"
)

func TestBuildImageTarballLoads(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "thing")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755))
	dst := filepath.Join(dir, "img.tar")
	ref := ComponentImage("kube-apiserver", "1.34.4")
	require.Equal(t, "registry.k8s.io/kube-apiserver:v1.34.4", ref)
	require.NoError(t, BuildImage(dst, ImageSpec{
		Ref:        ref,
		Files:      []ImageFile{{Src: bin, Path: "/usr/local/bin/kube-apiserver"}},
		Entrypoint: []string{"/usr/local/bin/kube-apiserver"},
		StopSignal: "SIGUSR1",
	}))

	tag, err := name.NewTag(ref)
	require.NoError(t, err)
	img, err := tarball.ImageFromPath(dst, &tag)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"/usr/local/bin/kube-apiserver"}, cf.Config.Entrypoint)
	require.Equal(t, "amd64", cf.Architecture)
	require.Equal(t, "SIGUSR1", cf.Config.StopSignal, "the runtime stops it with this signal")
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)

	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(dst) })
	require.NoError(t, err)
	require.Equal(t, []string{"registry.k8s.io/kube-apiserver:v1.34.4"}, m[0].RepoTags)
}

// A tarball is rebuilt when its spec changes, not only when a binary is
// newer: a file added to the image, or taken from elsewhere (a rootfs of
// other packages), makes it stale.
func TestEnsureImagesRebuildsOnASpecChange(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.WriteFile(bin, []byte("x"), 0o755))
	dst := filepath.Join(dir, "img.tar")
	spec := ImageSpec{Ref: "molt.local/lab/x:v1", Files: []ImageFile{{Src: bin, Path: "/x"}}, Entrypoint: []string{"/x"}}
	require.False(t, fresh(dst, spec), "no tarball yet")
	require.NoError(t, BuildImage(dst, spec))
	require.False(t, fresh(dst, spec), "a tarball without the spec it was built from")
	require.NoError(t, os.WriteFile(dst+".spec", []byte(specKey(spec)), 0o644))
	require.True(t, fresh(dst, spec))

	other := filepath.Join(dir, "protocols")
	require.NoError(t, os.WriteFile(other, []byte("tcp 6 TCP\n"), 0o644))
	grown := spec
	grown.Files = append(append([]ImageFile{}, spec.Files...), ImageFile{Src: other, Path: "/etc/protocols"})
	require.False(t, fresh(dst, grown), "a file added to the image")
	moved := spec
	moved.Files = []ImageFile{{Src: other, Path: "/x"}}
	require.False(t, fresh(dst, moved), "the same path from another source")
	env := spec
	env.Env = []string{"PATH=/usr/sbin"}
	require.False(t, fresh(dst, env))
	stop := spec
	stop.StopSignal = "SIGUSR1"
	require.False(t, fresh(dst, stop), "another stop signal")
}
