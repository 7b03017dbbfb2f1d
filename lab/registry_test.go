package lab

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
)

func TestMirrorRef(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.k8s.io/kube-proxy:v1.34.4":      "10.77.0.1:5000/kube-proxy:v1.34.4",
		"registry.k8s.io/coredns/coredns:v1.15.0": "10.77.0.1:5000/coredns/coredns:v1.15.0",
		"molt.local/lab/echo:v1":                  "10.77.0.1:5000/lab/echo:v1",
	} {
		got, err := mirrorRef(RegistryAddr(), ref)
		require.NoError(t, err, ref)
		require.Equal(t, want, got.String(), ref)
	}
	_, err := mirrorRef(RegistryAddr(), "docker.io/library/busybox:1")
	require.ErrorIs(t, err, ErrImage, "only the mirrored registries")
}

// The lab pushes an image archive into the registry the lab runs (the
// same package, blobs on disk), and a client asking the way a host's
// containerd asks its mirror — repository without the registry's host,
// ?ns= naming it — gets the image back; a second push sends no blob again.
func TestPushImagesServesThemAsAMirror(t *testing.T) {
	dir := t.TempDir()
	var (
		mu       sync.Mutex
		requests []string
	)
	logger := log.New(io.Discard, "", 0)
	reg := registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(filepath.Join(dir, "blobs"))), registry.Logger(logger))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.Method+" "+r.URL.Path)
		mu.Unlock()
		reg.ServeHTTP(w, r)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "blobs"), 0o755))

	bin := filepath.Join(dir, "kube-proxy")
	require.NoError(t, os.WriteFile(bin, []byte("not really kube-proxy"), 0o755))
	ref := KubeProxyImage("1.34.4")
	archive := filepath.Join(dir, "kp.tar")
	require.NoError(t, BuildImage(archive, ImageSpec{Ref: ref, Files: []ImageFile{{Src: bin, Path: kubeProxyBinary}}, Entrypoint: []string{kubeProxyBinary}}))
	images := ImageSet{ref: archive}
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)

	require.NoError(t, pushImages(ctx, addr, http.DefaultTransport, images, []string{ref}, log))
	// What containerd sends to a mirror of registry.k8s.io.
	resp, err := http.Get(srv.URL + "/v2/kube-proxy/manifests/v1.34.4?ns=registry.k8s.io")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	mirrored, err := name.NewTag(addr+"/kube-proxy:v1.34.4", name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(mirrored)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{kubeProxyBinary}, cf.Config.Entrypoint)

	mu.Lock()
	requests = nil
	mu.Unlock()
	require.NoError(t, pushImages(ctx, addr, http.DefaultTransport, images, []string{ref}, log))
	mu.Lock()
	defer mu.Unlock()
	for _, r := range requests {
		require.False(t, strings.HasPrefix(r, "PATCH ") || strings.HasPrefix(r, "POST "), "a second push uploads no blob: %v", requests)
	}

	err = pushImages(ctx, addr, http.DefaultTransport, images, []string{CoreDNSImage}, log)
	require.ErrorIs(t, err, ErrMissing, "no archive for the ref")
}
