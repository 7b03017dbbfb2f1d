package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// TestClusterApplySendsThePolicyWithTheSpec: --maintenance-policy puts the
// policy file into the registration's body, so one request stores both.
func TestClusterApplySendsThePolicyWithTheSpec(t *testing.T) {
	var got []api.ClusterSpec
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var spec api.ClusterSpec
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil || r.Method+" "+r.URL.Path != "PUT /v1/clusters/lab" {
			http.Error(w, fmt.Sprintf("%s %s: %v", r.Method, r.URL.Path, err), http.StatusBadRequest)
			return
		}
		got = append(got, spec)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(api.Cluster{Spec: api.ClusterSpec{Name: spec.Name}, Status: api.ClusterStatus{Version: spec.Version}})
	}))
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	specFile, policyFile := filepath.Join(dir, "lab.yaml"), filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(specFile, []byte("name: lab\nkind: standalone\nchannel: regular\nversion: \"1.33.6\"\npools: []\n"), 0o600))
	require.NoError(t, os.WriteFile(policyFile, []byte("exclusions:\n  - {name: sale, start: \"2026-12-01T00:00:00Z\", end: \"2026-12-08T00:00:00Z\", scope: no_minor_upgrades}\n"), 0o600))

	var out bytes.Buffer
	root := (&cli{out: &out}).root()
	root.SetArgs([]string{"--server", srv.URL, "cluster", "apply", "-f", specFile, "--maintenance-policy", policyFile})
	require.NoError(t, root.Execute())
	require.Len(t, got, 1)
	require.Equal(t, &api.MaintenancePolicy{Exclusions: []api.MaintenanceExclusion{{Name: "sale",
		Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC), Scope: "no_minor_upgrades"}}}, got[0].MaintenancePolicy)
	require.Equal(t, "cluster lab registered at 1.33.6\nmaintenance policy stored with it (1 exclusion(s))\n", out.String())

	// Without the flag, nothing is added to the spec.
	root = (&cli{out: &bytes.Buffer{}}).root()
	root.SetArgs([]string{"--server", srv.URL, "cluster", "apply", "-f", specFile})
	require.NoError(t, root.Execute())
	require.Nil(t, got[1].MaintenancePolicy)
}
