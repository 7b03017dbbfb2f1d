package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// TestBackupListTable pins moltctl backup list's table: newest first as
// the API answers, with the member each came from, the coordinator
// member holding it and its file; and the route it reads.
func TestBackupListTable(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	list := api.BackupList{Backups: []api.Backup{
		{ID: "lab-1.34.4-2/run/backup/a1", Upgrade: "lab-1.34.4-2", Node: "cp-1", Member: "https://10.0.0.11:2379", Revision: 48211,
			Size: 24 << 20, SHA256: "9f2c1e0b7a4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b", EtcdVersion: "3.6.4", TakenAt: t0,
			Holder: "molt-1", File: "/var/lib/molt/backups/lab/48211-20261128T090000Z.db"},
		{ID: "lab-1.34.3-1/run/backup/a0", Upgrade: "lab-1.34.3-1", Node: "cp-2", Member: "https://10.0.0.12:2379", Revision: 30120,
			Size: 900, SHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", TakenAt: t0.Add(-72 * time.Hour),
			Holder: "molt-2", File: "/var/lib/molt/backups/lab/30120-20261125T090000Z.db"},
	}}
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	}))
	t.Cleanup(srv.Close)
	var out bytes.Buffer
	root := (&cli{out: &out}).root()
	root.SetArgs([]string{"--server", srv.URL, "backup", "list", "lab"})
	require.NoError(t, root.Execute())
	require.Equal(t, "/v1/clusters/lab/backups", path)
	golden := filepath.Join("testdata", "backup-list.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, out.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run with -update to create it")
	require.Equal(t, string(want), out.String())
}
