package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/clock"
)

// beatMember is a member for the relay's tests: the leader or a follower
// that knows the leader's address. It records the beats that reach it,
// on their own (Heartbeat) or relayed, and refuses the nodes in refuse.
type beatMember struct {
	fakeLeadership
	AgentService
	HeartbeatRelay

	leader     bool
	leaderAddr string
	// notRelayable names nodes whose beats change the replica's record.
	notRelayable map[string]bool
	refuse       map[string]error

	mu      sync.Mutex
	direct  []string
	batches [][]coordinator.RelayedBeat
}

func (m *beatMember) IsLeader() bool         { return m.leader }
func (m *beatMember) LeaderHTTPAddr() string { return m.leaderAddr }

func (m *beatMember) Heartbeat(_ context.Context, h api.AgentHealth) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.direct = append(m.direct, h.Node)
	return m.refuse[h.Node]
}

func (m *beatMember) BeatRelayable(h api.AgentHealth) (bool, error) {
	return !m.notRelayable[h.Node], nil
}

func (m *beatMember) RelayedHeartbeats(_ context.Context, beats []coordinator.RelayedBeat) ([]error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batches = append(m.batches, beats)
	errs := make([]error, len(beats))
	for i, b := range beats {
		errs[i] = m.refuse[b.Health.Node]
	}
	return errs, nil
}

func (m *beatMember) seen() (direct []string, batches [][]coordinator.RelayedBeat) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.direct...), append([][]coordinator.RelayedBeat(nil), m.batches...)
}

// beatRouter serves the heartbeat routes as New does, with the caller
// taken to be the agent of the node the path names (authentication is
// tested in coordinator/auth_test.go), and the relayed route without
// authentication.
func beatRouter(m *beatMember, cfg Config) http.Handler {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	hs := newHandlers(servicesOf(m), cfg)
	if cfg.BeatRelayWindow > 0 {
		hs.beats = newBeatRelay(hs)
	}
	asAgent := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, n := chi.URLParam(r, "cluster"), chi.URLParam(r, "node")
			p := Principal{Kind: KindAgent, Name: "agent:" + c + "/" + n, Cluster: c, Node: n}
			next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
		})
	}
	r := chi.NewRouter()
	r.With(asAgent, hs.relayBeats).Post("/v1/agents/{cluster}/{node}/heartbeat", hs.agents.heartbeat)
	r.Post(relayedBeatsPath, hs.relayedBeats)
	return r
}

// beat sends node's heartbeat to the member at url and returns the status.
func beat(t *testing.T, url, node string) int {
	t.Helper()
	b, err := json.Marshal(api.AgentHealth{Cluster: "lab", Node: node, Kubelet: api.ComponentHealth{Healthy: true}, Containerd: api.ComponentHealth{Healthy: true}})
	require.NoError(t, err)
	resp, err := http.Post(url+"/v1/agents/lab/"+node+"/heartbeat", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode
}

// beatPair starts a leader and a follower that knows it.
func beatPair(t *testing.T, leader *beatMember, follower *beatMember, cfg Config) (leaderURL, followerURL string) {
	t.Helper()
	leader.leader = true
	ls := httptest.NewServer(beatRouter(leader, Config{}))
	t.Cleanup(ls.Close)
	follower.leaderAddr = strings.TrimPrefix(ls.URL, "http://")
	fs := httptest.NewServer(beatRouter(follower, cfg))
	t.Cleanup(fs.Close)
	return ls.URL, fs.URL
}

// TestFollowerRelaysBeatsInBatches: a full batch of beats at a follower
// reaches the leader as one request, and each beat is answered with the
// leader's answer to it (204, or the problem the leader found).
func TestFollowerRelaysBeatsInBatches(t *testing.T) {
	leader := &beatMember{refuse: map[string]error{"gone": fmt.Errorf("agent lab/gone is not registered: %w", coordinator.ErrNotFound)}}
	follower := &beatMember{}
	// A window far longer than the test: only a full batch is sent.
	_, furl := beatPair(t, leader, follower, Config{BeatRelayWindow: time.Hour})
	codes := make([]int, MaxRelayedBeats)
	var wg sync.WaitGroup
	for i := range MaxRelayedBeats {
		node := fmt.Sprintf("n-%d", i)
		if i == 7 {
			node = "gone"
		}
		wg.Go(func() { codes[i] = beat(t, furl, node) })
	}
	wg.Wait()
	direct, batches := leader.seen()
	require.Empty(t, direct, "no beat was forwarded on its own")
	require.Len(t, batches, 1, "one request carried every beat")
	require.Len(t, batches[0], MaxRelayedBeats)
	for i, code := range codes {
		if i == 7 {
			require.Equal(t, http.StatusNotFound, code, "the leader's refusal answers the beat it refused")
			continue
		}
		require.Equal(t, http.StatusNoContent, code, "beat %d", i)
	}
	fdirect, fbatches := follower.seen()
	require.Empty(t, fdirect)
	require.Empty(t, fbatches, "the follower notes nothing itself")
}

// TestRelayedBeatCarriesItsAge: the leader learns how long before the
// batch left the follower received each beat, by the follower's clock.
func TestRelayedBeatCarriesItsAge(t *testing.T) {
	leader, follower := &beatMember{}, &beatMember{}
	// The follower's clock reads 1.5 s later on every reading: received at
	// one reading, sent at the next.
	clock := steppingClock{Manual: clock.NewManual(time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)), step: 1500 * time.Millisecond}
	_, furl := beatPair(t, leader, follower, Config{BeatRelayWindow: time.Millisecond, Clock: clock})
	require.Equal(t, http.StatusNoContent, beat(t, furl, "n-1"))
	_, batches := leader.seen()
	require.Len(t, batches, 1)
	require.Equal(t, 1500*time.Millisecond, batches[0][0].Age)
	require.Equal(t, "n-1", batches[0][0].Health.Node)
}

// TestBeatsThatMustReachTheLeaderAlone: a beat that changes the
// replica's record is forwarded on its own; so is every beat of a batch
// the leader does not take (a leader of an older release, without the
// relayed route), and with relaying turned off.
func TestBeatsThatMustReachTheLeaderAlone(t *testing.T) {
	t.Run("a change", func(t *testing.T) {
		leader, follower := &beatMember{}, &beatMember{notRelayable: map[string]bool{"changed": true}}
		_, furl := beatPair(t, leader, follower, Config{BeatRelayWindow: time.Millisecond})
		require.Equal(t, http.StatusNoContent, beat(t, furl, "changed"))
		direct, batches := leader.seen()
		require.Equal(t, []string{"changed"}, direct)
		require.Empty(t, batches)
	})
	t.Run("an older leader", func(t *testing.T) {
		follower := &beatMember{}
		old := &beatMember{leader: true}
		hs := &agentHandlers{svc: old}
		r := chi.NewRouter() // no relayed route: 404
		r.Post("/v1/agents/{cluster}/{node}/heartbeat", func(w http.ResponseWriter, r *http.Request) {
			r = r.WithContext(withPrincipal(r.Context(), Principal{Kind: KindAgent, Cluster: "lab", Node: chi.URLParam(r, "node")}))
			hs.heartbeat(w, r)
		})
		ls := httptest.NewServer(r)
		t.Cleanup(ls.Close)
		follower.leaderAddr = strings.TrimPrefix(ls.URL, "http://")
		fs := httptest.NewServer(beatRouter(follower, Config{BeatRelayWindow: time.Millisecond}))
		t.Cleanup(fs.Close)
		require.Equal(t, http.StatusNoContent, beat(t, fs.URL, "n-1"))
		direct, _ := old.seen()
		require.Equal(t, []string{"n-1"}, direct)
	})
	t.Run("relaying off", func(t *testing.T) {
		leader, follower := &beatMember{}, &beatMember{}
		_, furl := beatPair(t, leader, follower, Config{BeatRelayWindow: -1})
		require.Equal(t, http.StatusNoContent, beat(t, furl, "n-1"))
		direct, batches := leader.seen()
		require.Equal(t, []string{"n-1"}, direct)
		require.Empty(t, batches)
	})
}

// TestRelayedRouteOnlyOnTheLeader: a member that does not lead refuses a
// relayed batch (503 not-leader) rather than forwarding it, and a batch
// over MaxRelayedBeats is refused with its rule.
func TestRelayedRouteOnlyOnTheLeader(t *testing.T) {
	follower := &beatMember{leaderAddr: "127.0.0.1:1"}
	fs := httptest.NewServer(beatRouter(follower, Config{}))
	t.Cleanup(fs.Close)
	post := func(url string, n int) (int, api.Problem) {
		req := api.RelayedBeats{Beats: make([]api.RelayedBeat, n)}
		b, err := json.Marshal(req)
		require.NoError(t, err)
		resp, err := http.Post(url+relayedBeatsPath, "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		defer resp.Body.Close()
		var p api.Problem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp.StatusCode, p
	}
	code, p := post(fs.URL, 1)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, api.ProblemTypeBase+api.ProblemNotLeader, p.Type)

	leader := &beatMember{leader: true}
	ls := httptest.NewServer(beatRouter(leader, Config{}))
	t.Cleanup(ls.Close)
	code, p = post(ls.URL, MaxRelayedBeats+1)
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Equal(t, "relayed-beats", p.Rule)
	_, batches := leader.seen()
	require.Empty(t, batches)
}

// steppingClock moves step forward on every reading.
type steppingClock struct {
	*clock.Manual
	step time.Duration
}

func (c steppingClock) Now() time.Time {
	t := c.Manual.Now()
	c.Advance(c.step)
	return t
}
