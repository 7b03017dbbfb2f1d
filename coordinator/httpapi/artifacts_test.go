package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestArtifacts(t *testing.T) {
	dir := t.TempDir()
	body := []byte("#!/bin/sh\necho kubelet v1.34.4\n")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "v1.34.4"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "v1.34.4", "kubelet"), body, 0o644))
	outside := filepath.Join(filepath.Dir(dir), "secret")
	require.NoError(t, os.WriteFile(outside, []byte("no"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "escape")))

	// The handler alone: who may read artifacts is the route table's
	// business (auth tests in package coordinator).
	srv := httptest.NewServer(Artifacts(dir))
	defer srv.Close()
	get := func(p string) (int, []byte) {
		resp, err := http.Get(srv.URL + p)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b
	}
	code, b := get("/artifacts/v1.34.4/kubelet")
	require.Equal(t, 200, code)
	sum := sha256.Sum256(b)
	want := sha256.Sum256(body)
	require.Equal(t, hex.EncodeToString(want[:]), hex.EncodeToString(sum[:]))

	for _, p := range []string{"/artifacts/", "/artifacts/v1.34.4/", "/artifacts/v1.34.4", "/artifacts/missing", "/artifacts/../secret", "/artifacts/escape", "/artifacts/v1.34.4/../../secret"} {
		code, _ := get(p)
		require.Equal(t, http.StatusNotFound, code, p)
	}
}
