package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

func TestSecretsRewrap(t *testing.T) {
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(api.RewrapResult{Key: "k-2", Rewrapped: []string{"lab", "edge"}, Current: []string{}, Stale: []string{"vault"}})
	}))
	t.Cleanup(srv.Close)

	var out bytes.Buffer
	root := (&cli{out: &out}).root()
	root.SetArgs([]string{"--server", srv.URL, "secrets", "rewrap"})
	require.NoError(t, root.Execute())
	require.Equal(t, []string{"POST /v1/secrets/rewrap"}, calls)
	require.Equal(t, "primary key k-2\nrewrapped: lab, edge\nalready sealed with it: -\nchanged meanwhile, run again: vault\n", out.String())
}
