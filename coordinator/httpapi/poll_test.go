package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// pollingMember answers long polls: it waits the whole wait unless the
// request's context ends first (counted in cut) or release is closed.
type pollingMember struct {
	AgentService
	ReleaseService // PUT /v1/releases, whose body never arrives

	started chan struct{} // receives when a poll starts waiting
	release chan struct{}
	cut     atomic.Int32
}

func (m *pollingMember) PollAgent(ctx context.Context, _, _ string, wait time.Duration) (api.OperationsResponse, error) {
	if m.started != nil {
		m.started <- struct{}{}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-m.release:
	case <-ctx.Done():
		m.cut.Add(1)
		return api.OperationsResponse{}, ctx.Err()
	}
	return api.OperationsResponse{}, nil
}

// pollRouter serves the poll handler alone: authentication is tested
// elsewhere (coordinator/auth_test.go).
func pollRouter(m *pollingMember, cfg Config) http.Handler {
	hs := &agentHandlers{svc: m, maxPoll: cfg.MaxPoll, maxPolls: cfg.MaxPollsPerNode, polls: map[string]int{}}
	if hs.maxPolls <= 0 {
		hs.maxPolls = DefaultMaxPollsPerNode
	}
	if hs.maxPoll <= 0 {
		hs.maxPoll = time.Minute
	}
	r := chi.NewRouter()
	r.Get("/v1/agents/{cluster}/{node}/operations", hs.poll)
	r.Put("/v1/releases/{version}", (&releaseHandlers{svc: m}).putRelease)
	return r
}

func TestLongPollOutlivesTheReadTimeout(t *testing.T) {
	m := &pollingMember{release: make(chan struct{})}
	srv := httptest.NewUnstartedServer(pollRouter(m, Config{}))
	srv.Config = NewServer(srv.Config.Handler)
	srv.Config.ReadTimeout = 100 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)

	start := time.Now()
	resp, err := http.Get(srv.URL + "/v1/agents/lab/n1/operations?wait=1s")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Zero(t, m.cut.Load(), "the read timeout ended the poll's context")
	require.GreaterOrEqual(t, time.Since(start), time.Second, "the poll waited its whole wait")
}

func TestSlowBodyIsCutOffByTheReadTimeout(t *testing.T) {
	srv := httptest.NewUnstartedServer(pollRouter(&pollingMember{}, Config{}))
	srv.Config = NewServer(srv.Config.Handler)
	srv.Config.ReadTimeout = 100 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "PUT /v1/releases/1.34.4 HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	require.NoError(t, err)
	// The rest of the body never comes: the server gives up on its own.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		defer resp.Body.Close()
		require.GreaterOrEqual(t, resp.StatusCode, 400)
	} else {
		var ne net.Error
		require.False(t, errorsAs(err, &ne) && ne.Timeout(), "the server kept waiting for the body: %v", err)
	}
}

func TestSecondConcurrentPollOfANodeIsRefused(t *testing.T) {
	m := &pollingMember{started: make(chan struct{}, 1), release: make(chan struct{})}
	srv := httptest.NewServer(pollRouter(m, Config{}))
	t.Cleanup(srv.Close)

	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/v1/agents/lab/n1/operations?wait=30s")
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-m.started

	rec := httptest.NewRecorder()
	pollRouterServe(srv, rec, "/v1/agents/lab/n1/operations?wait=1s")
	p := requireProblem(t, rec, http.StatusTooManyRequests, api.ProblemTooManyRequests)
	require.Equal(t, "poll-concurrency", p.Rule)

	// Another node polls meanwhile.
	m.started = nil
	rec = httptest.NewRecorder()
	pollRouterServe(srv, rec, "/v1/agents/lab/n2/operations?wait=0s")
	require.Equal(t, 200, rec.Code, rec.Body.String())

	close(m.release)
	require.Equal(t, 200, <-first)
	// With the first poll over, the node may poll again.
	rec = httptest.NewRecorder()
	pollRouterServe(srv, rec, "/v1/agents/lab/n1/operations?wait=0s")
	require.Equal(t, 200, rec.Code, rec.Body.String())
}

// pollRouterServe sends a GET through srv and records the answer.
func pollRouterServe(srv *httptest.Server, rec *httptest.ResponseRecorder, path string) {
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		rec.WriteHeader(0)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		rec.Header()[k] = v
	}
	rec.WriteHeader(resp.StatusCode)
	_, _ = rec.Body.ReadFrom(resp.Body)
}

func errorsAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}
