package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInRootFollowsLinksInsideTheTree(t *testing.T) {
	root := t.TempDir()
	mk := func(p, data string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte(data), 0o644))
	}
	link := func(p, target string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		require.NoError(t, os.Symlink(target, filepath.Join(root, p)))
	}
	mk("usr/lib/x86_64-linux-gnu/libc.so.6", "libc")
	mk("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "ld")
	link("lib", "usr/lib")                                                           // merged /usr, relative
	link("lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2") // absolute: inside the tree
	link("usr/lib/x86_64-linux-gnu/libz.so.1", "libz.so.1.2.13")
	mk("usr/lib/x86_64-linux-gnu/libz.so.1.2.13", "z")
	link("loop", "loop")

	for p, want := range map[string]string{
		"/lib64/ld-linux-x86-64.so.2":     "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"/lib/x86_64-linux-gnu/libc.so.6": "usr/lib/x86_64-linux-gnu/libc.so.6",
		"/lib/x86_64-linux-gnu/libz.so.1": "usr/lib/x86_64-linux-gnu/libz.so.1.2.13",
	} {
		got, err := inRoot(root, p)
		require.NoError(t, err, p)
		require.Equal(t, filepath.Join(root, want), got, p)
	}
	_, err := inRoot(root, "/loop")
	require.ErrorIs(t, err, ErrImage)
	_, err = inRoot(root, "/lib/x86_64-linux-gnu/libmissing.so")
	require.ErrorIs(t, err, ErrImage)
	_, err = inRoot(root, "/usr/lib")
	require.ErrorIs(t, err, ErrImage, "a directory is not a file to copy")
}

// This machine's own root is a Debian tree too: ls needs the loader and libc.
func TestBinaryWithLibsListsTheLoaderAndLibraries(t *testing.T) {
	files, err := binaryWithLibs("/", "/usr/bin/ls")
	require.NoError(t, err)
	require.Equal(t, "/usr/bin/ls", files[0].Path)
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
		fi, err := os.Stat(f.Src)
		require.NoError(t, err)
		require.True(t, fi.Mode().IsRegular(), f.Src)
	}
	joined := strings.Join(paths, " ")
	require.Contains(t, joined, "/lib64/ld-linux-x86-64.so.2")
	require.Contains(t, joined, "/libc.so.6")
}
