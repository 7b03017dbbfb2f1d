package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
)

// changingFollower is a follower whose leader the test sets, and whose
// LeaderChanged the test signals, as Raft's observations do.
type changingFollower struct {
	indexedMember
	mu     sync.Mutex
	addr   string
	signal chan struct{}
}

func (f *changingFollower) IsLeader() bool { return false }

func (f *changingFollower) LeaderHTTPAddr() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addr
}

func (f *changingFollower) LeaderChanged() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.signal
}

// observe sets the leader to addr and signals a change.
func (f *changingFollower) observe(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addr = addr
	close(f.signal)
	f.signal = make(chan struct{})
}

// heldLeader starts a leader whose writes wait until release is closed,
// and returns its address and a channel that receives once per write that
// reached it.
func heldLeader(t *testing.T, release <-chan struct{}) (addr string, arrived <-chan struct{}) {
	leader := &indexedMember{}
	srv := New(servicesOf(leader), Config{})
	got := make(chan struct{}, 4)
	ls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			got <- struct{}{}
			<-release
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ls.Close)
	return ls.Listener.Addr().String(), got
}

// forwardedWrite starts a follower of the leader at addr and sends it a
// write in the background, which it forwards; done receives its result.
func forwardedWrite(t *testing.T, addr string) (f *changingFollower, done <-chan error) {
	f = &changingFollower{addr: addr, signal: make(chan struct{})}
	fs := httptest.NewServer(New(servicesOf(f), Config{}))
	t.Cleanup(fs.Close)
	c := client.New(fs.URL, nil)
	c.SetBearerToken(testToken)
	result := make(chan error, 1)
	go func() {
		_, err := c.Do(context.Background(), http.MethodPut, "/v1/releases/1.34.4", api.Release{Version: "1.34.4"}, nil)
		result <- err
	}()
	return f, result
}

// TestForwardOutlivesASignalForTheSameLeader: a leader-change signal that
// names the leader the write was forwarded to (Raft's observation arriving
// after Raft already answered with that leader) leaves the forward alone.
func TestForwardOutlivesASignalForTheSameLeader(t *testing.T) {
	release := make(chan struct{})
	addr, arrived := heldLeader(t, release)
	f, done := forwardedWrite(t, addr)
	<-arrived
	f.observe(addr)
	f.observe(addr)
	close(release)
	require.NoError(t, <-done, "the write reached the leader it was sent to and was answered")
}

// TestForwardEndsWhenAnotherLeaderIsKnown: a write forwarded to a leader
// that is replaced while it waits is answered 503 no-leader, so the client
// retries (a write is not sent twice by the member itself).
func TestForwardEndsWhenAnotherLeaderIsKnown(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	addr, arrived := heldLeader(t, release)
	f, done := forwardedWrite(t, addr)
	<-arrived
	f.observe("127.0.0.1:1")
	err := <-done
	require.Error(t, err)
	require.Contains(t, err.Error(), errLeaderChanged.Error())
}
