package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/testenv"
)

// startContainerd runs Debian's containerd on a private socket, root and
// state dir (CRI disabled: these tests need only the image and version
// services) and returns the socket path.
func startContainerd(t *testing.T) string {
	t.Helper()
	testenv.RequireRoot(t)
	bin := testenv.RequireBinary(t, "containerd")
	dir, err := os.MkdirTemp("", "molt-ctrd-") // short path: unix sockets are limited to 108 bytes
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "c.sock")
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(conf), 0o644))
	cmd := exec.Command(bin, "--config", filepath.Join(dir, "config.toml"))
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			t.Log(string(b))
		}
	})
	rt := NewContainerdRuntime(sock, "native")
	t.Cleanup(func() { _ = rt.Close() })
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := rt.Version(ctx)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "containerd did not answer")
	return sock
}

// imageTarball writes a small random single-layer image as a docker-save
// tarball tagged ref.
func imageTarball(t *testing.T, path, ref string) {
	t.Helper()
	layer, err := random.Layer(1024, "application/vnd.docker.image.rootfs.diff.tar.gzip")
	require.NoError(t, err)
	img, err := random.Image(0, 0)
	require.NoError(t, err)
	img, err = mutate.AppendLayers(img, layer)
	require.NoError(t, err)
	// containerd imports only images for this platform.
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	img, err = mutate.ConfigFile(img, cf)
	require.NoError(t, err)
	tag, err := name.NewTag(ref)
	require.NoError(t, err)
	require.NoError(t, tarball.WriteToFile(path, tag, img))
}

func TestContainerdRuntime(t *testing.T) {
	sock := startContainerd(t)
	ctx := context.Background()
	rt := NewContainerdRuntime(sock, "native")
	t.Cleanup(func() { _ = rt.Close() })

	v, err := rt.Version(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, v)

	tar := filepath.Join(t.TempDir(), "img.tar")
	imageTarball(t, tar, "registry.example/molt/test:v1")
	names, err := rt.ImportArchive(ctx, tar)
	require.NoError(t, err)
	require.Contains(t, names, "registry.example/molt/test:v1")
	imgs, err := rt.Images(ctx)
	require.NoError(t, err)
	require.Contains(t, imgs, "registry.example/molt/test:v1")

	pods, err := rt.StaticPods(ctx)
	require.NoError(t, err)
	require.Empty(t, pods)

	err = rt.Pull(ctx, "127.0.0.1:1/nothing:here")
	require.ErrorIs(t, err, ErrRuntime)
}

func TestImportImagesOperationWithContainerd(t *testing.T) {
	sock := startContainerd(t)
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	tar := filepath.Join(t.TempDir(), "img.tar")
	imageTarball(t, tar, "registry.example/molt/pause:3.10")
	b, err := os.ReadFile(tar)
	require.NoError(t, err)
	url, sum := h.serve("img.tar", b)

	cfg := h.cfg
	cfg.HostRoot = "/" // the socket is an absolute path of this machine
	cfg.DataDir = filepath.Join(h.root, "data")
	cfg.KubeletBin = h.kubelet()
	cfg.ManifestDir = filepath.Join(h.root, "etc/kubernetes/manifests")
	cfg.ContainerdSocket = sock
	cfg.Snapshotter = "native"
	cfg.Runtime, cfg.Pods = nil, nil
	_, _ = runAgent(t, cfg)

	// IDs are shaped as the coordinator makes them, slashes included.
	coord.enqueue(api.Operation{ID: "lab-1/n1/2/a0", Kind: api.OpImportImages, ImportImages: &api.ImportImages{
		Archives: []api.ImageArchive{{URL: url, SHA256: sum}}}})
	res := coord.waitResult(t, "lab-1/n1/2/a0")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)
	require.Equal(t, "registry.example/molt/pause:3.10", res.Details["images"])

	coord.enqueue(api.Operation{ID: "imp-bad", Kind: api.OpImportImages, ImportImages: &api.ImportImages{
		Archives: []api.ImageArchive{{URL: url, SHA256: sumOf([]byte("other"))}}}})
	res = coord.waitResult(t, "imp-bad")
	require.Equal(t, api.OpFailed, res.State)
	require.Contains(t, res.Message, "checksum mismatch")

	// Heartbeats carry containerd's version read through its API.
	require.Eventually(t, func() bool {
		hbs := coord.Heartbeats()
		n := len(hbs)
		return n > 0 && hbs[n-1].Containerd.Healthy && hbs[n-1].Containerd.Version != ""
	}, 10*time.Second, 20*time.Millisecond)
}
