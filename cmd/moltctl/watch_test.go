package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// laggingMember answers like a follower that has not yet applied the
// upgrade it just forwarded to the leader: the first reads still show the
// previous, finished upgrade.
type laggingMember struct {
	mu        sync.Mutex
	staleRead int
	reads     int
}

func (m *laggingMember) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	previous := api.Upgrade{ID: "c1-u1", Cluster: "c1", From: "1.33.13", To: "1.34.3", State: api.UpgradeDone}
	current := api.Upgrade{ID: "c1-u2", Cluster: "c1", From: "1.34.3", To: "1.34.4", State: api.UpgradeRunning}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/clusters/c1/upgrade":
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(current)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/clusters/c1/upgrade":
		m.reads++
		switch {
		case m.reads <= m.staleRead:
			_ = json.NewEncoder(w).Encode(previous)
		case m.reads == m.staleRead+1:
			_ = json.NewEncoder(w).Encode(current)
		default:
			done := current
			done.State = api.UpgradeDone
			_ = json.NewEncoder(w).Encode(done)
		}
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"status":404}`)
	}
}

func TestUpgradeStartWatchFollowsTheStartedUpgrade(t *testing.T) {
	m := &laggingMember{staleRead: 3}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)

	out, err := moltctl(t, srv, "upgrade", "start", "c1", "1.34.4", "--watch", "-o", "json")
	require.NoError(t, err)
	require.Equal(t, 5, m.reads, "the previous upgrade's done did not end the watch")
	dec := json.NewDecoder(strings.NewReader(out))
	var seen []string
	for dec.More() {
		var u api.Upgrade
		require.NoError(t, dec.Decode(&u))
		seen = append(seen, u.ID+" "+string(u.State))
	}
	require.Equal(t, []string{"c1-u2 running", "c1-u2 done"}, seen, "only the started upgrade is shown")
}
