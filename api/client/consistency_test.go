package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
)

// indexMember answers at a fixed applied index and, like a coordinator
// member, refuses a read asking for more as lagging.
type indexMember struct {
	srv     *httptest.Server
	applied atomic.Uint64
	mu      sync.Mutex
	asked   []string // the MinIndexHeader of each request
}

func newIndexMember(t *testing.T, applied uint64) *indexMember {
	m := &indexMember{}
	m.applied.Store(applied)
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.asked = append(m.asked, r.Header.Get(api.MinIndexHeader))
		m.mu.Unlock()
		if want, err := strconv.ParseUint(r.Header.Get(api.MinIndexHeader), 10, 64); err == nil && want > m.applied.Load() {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"type":%q,"status":503,"detail":"behind"}`, api.ProblemTypeBase+api.ProblemLagging)
			return
		}
		w.Header().Set(api.IndexHeader, strconv.FormatUint(m.applied.Load(), 10))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"index":%d}`, m.applied.Load())
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *indexMember) read(t *testing.T, c *client.Client) uint64 {
	t.Helper()
	var out struct{ Index uint64 }
	_, err := c.Do(context.Background(), http.MethodGet, "/v1/clusters/c1/upgrade", nil, &out)
	require.NoError(t, err)
	return out.Index
}

func TestClientNeverReadsOlderStateThanItSaw(t *testing.T) {
	ahead, behind := newIndexMember(t, 12), newIndexMember(t, 10)
	c := client.NewEndpoints([]string{ahead.srv.URL, behind.srv.URL}, nil)

	require.Equal(t, uint64(12), ahead.read(t, c))
	require.Equal(t, uint64(12), c.Seen())
	ahead.srv.Close() // the member that answered goes away

	_, err := c.Do(context.Background(), http.MethodGet, "/v1/clusters/c1/upgrade", nil, nil)
	require.True(t, api.IsProblem(err, api.ProblemLagging), "refused, not served stale: %v", err)
	require.Equal(t, []string{"12"}, behind.asked)
}

func TestClientFailsOverFromALaggingMember(t *testing.T) {
	first, behind, ahead := newIndexMember(t, 8), newIndexMember(t, 3), newIndexMember(t, 9)
	c := client.NewEndpoints([]string{first.srv.URL, behind.srv.URL, ahead.srv.URL}, nil)
	require.Equal(t, uint64(8), first.read(t, c))
	first.srv.Close()

	require.Equal(t, uint64(9), ahead.read(t, c), "the lagging member sent the client on")
	require.Equal(t, []string{"8"}, behind.asked)
	require.Equal(t, uint64(9), c.Seen())
}

func TestClientAcceptsACoordinatorRestoredFromAnOlderBackup(t *testing.T) {
	m := newIndexMember(t, 40)
	c := client.New(m.srv.URL, nil)
	require.Equal(t, uint64(40), m.read(t, c))
	m.applied.Store(7) // every member is now behind what the client saw

	require.Equal(t, uint64(7), m.read(t, c), "when every member is behind, their state is the truth")
	require.Equal(t, []string{"", "40", ""}, m.asked)
	require.Equal(t, uint64(7), c.Seen())
}
