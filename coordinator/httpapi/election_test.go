package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
)

// electingFollower is a follower that knows no leader until the test
// names one, and tells the test when a request first found none.
type electingFollower struct {
	changingFollower
	once  sync.Once
	asked chan struct{} // closed when a request first found no leader
}

func newElectingFollower() *electingFollower {
	return &electingFollower{changingFollower: changingFollower{signal: make(chan struct{})}, asked: make(chan struct{})}
}

func (f *electingFollower) LeaderHTTPAddr() string {
	addr := f.changingFollower.LeaderHTTPAddr()
	if addr == "" {
		f.once.Do(func() { close(f.asked) })
	}
	return addr
}

// learn makes addr the leader's address: announced by a leader
// observation (an election's end), or not (Raft named the leader before,
// and its member metadata, with the address, is applied now).
func (f *electingFollower) learn(addr string, observed bool) {
	if observed {
		f.observe(addr)
		return
	}
	f.mu.Lock()
	f.addr = addr
	f.mu.Unlock()
}

// plainLeader serves a leader's API and its read index over plain HTTP
// (the read index's route wants a member's certificate, which these
// tests do not have) and returns its address.
func plainLeader(t *testing.T) string {
	srv := New(servicesOf(&indexedMember{}), Config{})
	ls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == readIndexPath {
			writeJSON(w, http.StatusOK, api.ReadIndex{Index: 0})
			return
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ls.Close)
	return ls.Listener.Addr().String()
}

// TestOperatorWaitsForALeader: an operator's write, or read, at a member
// that knows no leader (an election under way) or not yet the leader's
// address is held until it knows one, and then served, rather than
// answered 503 no-leader at once: an operator's client that knows this
// member alone would fail for the whole election. (The coordinator's
// frozen-member test saw its leader step down under load before the
// freeze, and a write of the test fail with 503 no-leader.)
func TestOperatorWaitsForALeader(t *testing.T) {
	for _, tt := range []struct {
		name     string
		method   string
		observed bool
	}{
		{"write, leader elected", http.MethodPut, true},
		{"write, leader's address applied", http.MethodPut, false},
		{"read, leader elected", http.MethodGet, true},
		{"read, leader's address applied", http.MethodGet, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			leader := plainLeader(t)
			f := newElectingFollower()
			// The hold ends when the leader is known; a deadline this far
			// off never ends it.
			fs := httptest.NewServer(New(servicesOf(f), Config{CatchUp: time.Hour}))
			t.Cleanup(fs.Close)
			c := client.New(fs.URL, nil)
			c.SetBearerToken(testToken)
			done := make(chan error, 1)
			go func() {
				var err error
				if tt.method == http.MethodPut {
					_, err = c.Do(context.Background(), http.MethodPut, "/v1/releases/1.34.4", api.Release{Version: "1.34.4"}, nil)
				} else {
					_, err = c.Do(context.Background(), http.MethodGet, "/v1/releases", nil, nil)
				}
				done <- err
			}()
			<-f.asked
			f.learn(leader, tt.observed)
			require.NoError(t, <-done)
		})
	}
}
