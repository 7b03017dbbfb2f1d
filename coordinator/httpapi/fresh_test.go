package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// readAt reads /v1/releases at url with testToken and returns the status
// and, for a refusal, the problem.
func readAt(t *testing.T, url string) (int, api.Problem) {
	t.Helper()
	resp := getReleases(t, url, "")
	var p api.Problem
	if resp.StatusCode >= 300 {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	}
	return resp.StatusCode, p
}

// TestTokenReadWaitsForTheLeadersReadIndex: a follower judges a token
// only once it has applied the leader's read index, and refuses (503
// lagging, credential-freshness) while it has not.
func TestTokenReadWaitsForTheLeadersReadIndex(t *testing.T) {
	// The leader's answer (its route wants a member's certificate, which
	// these plain-HTTP tests do not have; the coordinator's tests run it).
	ls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != readIndexPath {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, http.StatusOK, api.ReadIndex{Index: 10})
	}))
	t.Cleanup(ls.Close)
	follower := &indexedMember{leader: ls.Listener.Addr().String()}
	follower.applied.Store(5)
	fs := httptest.NewServer(New(servicesOf(follower), Config{CatchUp: 20 * time.Millisecond}))
	t.Cleanup(fs.Close)

	status, p := readAt(t, fs.URL)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, api.ProblemLagging, p.Suffix())
	require.Equal(t, ruleFresh, p.Rule)
	require.Contains(t, p.Detail, "applied index 5, the leader 10")

	follower.applied.Store(10)
	status, p = readAt(t, fs.URL)
	require.Equal(t, http.StatusOK, status, "%+v", p)
}

// TestTokenReadWithoutALeaderIsRefused: a follower that knows no leader
// refuses an operator's read (503 no-leader) rather than judge the token
// by its own replica.
func TestTokenReadWithoutALeaderIsRefused(t *testing.T) {
	f := &changingFollower{signal: make(chan struct{})}
	fs := httptest.NewServer(New(servicesOf(f), Config{CatchUp: 20 * time.Millisecond}))
	t.Cleanup(fs.Close)
	status, p := readAt(t, fs.URL)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, api.ProblemNoLeader, p.Suffix())
	require.Equal(t, ruleFresh, p.Rule)
}

// TestTokenReadUnderALeaderOfAnOlderRelease: a leader that does not know
// the read index (404) leaves the follower judging by its own replica, as
// before, so that an upgrade of the members one by one does not refuse
// every read at the upgraded ones.
func TestTokenReadUnderALeaderOfAnOlderRelease(t *testing.T) {
	ls := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(ls.Close)
	follower := &indexedMember{leader: ls.Listener.Addr().String()}
	follower.applied.Store(5)
	fs := httptest.NewServer(New(servicesOf(follower), Config{}))
	t.Cleanup(fs.Close)
	status, p := readAt(t, fs.URL)
	require.Equal(t, http.StatusOK, status, "%+v", p)
}
