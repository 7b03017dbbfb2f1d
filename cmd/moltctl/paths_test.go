package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPathsEscapeNames: a name that needs escaping ("a/b?c", "n 1/x",
// "1.2/3%") reaches the coordinator as one path segment of the route the
// command means, whichever command names it.
func TestPathsEscapeNames(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		// Nothing to decode: each command goes as far as an empty answer
		// lets it, which is past its first request.
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	spec, rel, pol := filepath.Join(dir, "spec.yaml"), filepath.Join(dir, "release.yaml"), filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(spec, []byte("name: a/b?c\nkind: standalone\nversion: \"1.33.6\"\npools: []\n"), 0o600))
	require.NoError(t, os.WriteFile(rel, []byte("version: 1.2/3%\n"), 0o600))
	require.NoError(t, os.WriteFile(pol, []byte("{}\n"), 0o600))

	const cl = "a%2Fb%3Fc"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "get", "a/b?c"}, "GET /v1/clusters/" + cl},
		{[]string{"cluster", "apply", "-f", spec}, "PUT /v1/clusters/" + cl},
		{[]string{"cluster", "why", "a/b?c"}, "GET /v1/clusters/" + cl + "/upgrade-status"},
		{[]string{"release", "apply", "-f", rel}, "PUT /v1/releases/1.2%2F3%25"},
		{[]string{"channel", "set", "x/y", "--default", "1.33.6"}, "PUT /v1/channels/x%2Fy"},
		{[]string{"upgrade", "start", "a/b?c", "1.34.4"}, "POST /v1/clusters/" + cl + "/upgrade"},
		{[]string{"upgrade", "start", "--dry-run", "a/b?c", "1.34.4"}, "POST /v1/clusters/" + cl + "/upgrade"},
		{[]string{"upgrade", "status", "a/b?c"}, "GET /v1/clusters/" + cl + "/upgrade"},
		{[]string{"upgrade", "watch", "a/b?c"}, "GET /v1/clusters/" + cl + "/upgrade"},
		{[]string{"pool", "cancel", "a/b?c", "p#1"}, "POST /v1/clusters/" + cl + "/pools/p%231/upgrade/cancel"},
		{[]string{"node", "retry", "a/b?c", "n 1/x"}, "POST /v1/clusters/" + cl + "/nodes/n%201%2Fx/retry"},
		{[]string{"maintenance", "set", "a/b?c", "-f", pol}, "PUT /v1/clusters/" + cl + "/maintenance-policy"},
		{[]string{"maintenance", "get", "a/b?c"}, "GET /v1/clusters/" + cl + "/maintenance-policy"},
		{[]string{"maintenance", "check", "a/b?c"}, "GET /v1/clusters/" + cl + "/maintenance-policy/check"},
		{[]string{"preflight", "run", "a/b?c"}, "GET /v1/clusters/" + cl},
		{[]string{"token", "delete", "t/1"}, "DELETE /v1/tokens/t%2F1"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			root := (&cli{out: &bytes.Buffer{}}).root()
			root.SetArgs(append([]string{"--server", srv.URL}, tc.args...))
			_ = root.Execute() // an empty answer may not satisfy the command; the request is what counts
			mu.Lock()
			defer mu.Unlock()
			require.NotEmpty(t, got, "%v sent nothing", tc.args)
			require.Equal(t, tc.want, got[0], "%v", tc.args)
		})
	}
}

// TestNodeRetryPrintsNoUpgrade: the coordinator answers a retry with 204
// and no body; moltctl decodes nothing and, asked for JSON or YAML,
// prints nothing rather than an empty upgrade.
func TestNodeRetryPrintsNoUpgrade(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method+" "+r.URL.Path != "POST /v1/clusters/lab/nodes/w1/retry" {
			http.Error(w, r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ output, want string }{
		{"text", "node w1: retrying\n"},
		{"json", ""},
		{"yaml", ""},
	} {
		t.Run(tc.output, func(t *testing.T) {
			var out bytes.Buffer
			root := (&cli{out: &out}).root()
			root.SetArgs([]string{"--server", srv.URL, "node", "retry", "lab", "w1", "-o", tc.output})
			require.NoError(t, root.Execute())
			require.Equal(t, tc.want, out.String())
		})
	}
}
