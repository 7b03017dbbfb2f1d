package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
)

// member is a fake coordinator member that counts the requests it served
// and answers each with status (200 with an empty operation list, or a
// problem).
type member struct {
	srv    *httptest.Server
	hits   atomic.Int32
	status atomic.Int32
}

func newMember(t *testing.T) *member {
	t.Helper()
	m := &member{}
	m.status.Store(http.StatusOK)
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.hits.Add(1)
		if st := int(m.status.Load()); st != http.StatusOK {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(st)
			_, _ = w.Write([]byte(`{"type":"https://molt.dev/problems/no-leader","title":"No leader","status":503}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"operations":[]}`))
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// down returns the URL of a server that no longer listens.
func down(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.NotFoundHandler())
	s.Close()
	return s.URL
}

func poll(c *client.Client) error {
	_, err := c.PollOperations(context.Background(), "c1", "n1", time.Second)
	return err
}

func TestClientFailsOverToTheNextEndpoint(t *testing.T) {
	dead, live := down(t), newMember(t)
	c := client.NewEndpoints([]string{dead, live.srv.URL}, nil)

	require.NoError(t, poll(c))
	require.Equal(t, live.srv.URL, c.Base(), "the endpoint that answered is remembered")
	require.NoError(t, poll(c))
	require.EqualValues(t, 2, live.hits.Load())
}

func TestClientFailsOverOnUnavailable(t *testing.T) {
	noLeader, live := newMember(t), newMember(t)
	noLeader.status.Store(http.StatusServiceUnavailable)
	c := client.NewEndpoints([]string{noLeader.srv.URL, live.srv.URL}, nil)

	require.NoError(t, poll(c), "a GET moves on from a 503")
	require.NoError(t, c.ReportResult(context.Background(), "c1", "n1", api.OperationResult{ID: "op", State: api.OpSucceeded}),
		"a result is idempotent by operation ID, so it moves on too")
	require.EqualValues(t, 1, noLeader.hits.Load(), "the second request starts at the member that answered")
	require.EqualValues(t, 2, live.hits.Load())
	require.Equal(t, live.srv.URL, c.Base())

	// The remembered member loses its leader too: back to the first.
	live.status.Store(http.StatusBadGateway)
	noLeader.status.Store(http.StatusOK)
	require.NoError(t, poll(c))
	require.Equal(t, noLeader.srv.URL, c.Base())
}

func TestClientAllEndpointsDown(t *testing.T) {
	a, b := down(t), newMember(t)
	b.status.Store(http.StatusServiceUnavailable)
	c := client.NewEndpoints([]string{a, b.srv.URL}, nil)

	err := poll(c)
	require.Error(t, err)
	require.ErrorContains(t, err, "no coordinator endpoint answered")
	require.ErrorContains(t, err, a)
	require.ErrorContains(t, err, b.srv.URL)
	require.True(t, api.IsProblem(err, api.ProblemNoLeader), "each endpoint's error stays reachable: %v", err)
	var ue *url.Error
	require.ErrorAs(t, err, &ue)
}

func TestClientDoesNotRepeatAnUnsafePost(t *testing.T) {
	first, second := newMember(t), newMember(t)
	first.status.Store(http.StatusServiceUnavailable)
	c := client.NewEndpoints([]string{first.srv.URL, second.srv.URL}, nil)

	// The 503 may come from a member whose forward reached the leader, so
	// a POST that is not idempotent (this one starts a preflight run) is
	// not sent again.
	_, err := c.StartPreflight(context.Background(), "c1", "1.34.4")
	require.True(t, api.IsProblem(err, api.ProblemNoLeader), "%v", err)
	require.EqualValues(t, 0, second.hits.Load())

	// A POST that surely never left (connection refused) is.
	c = client.NewEndpoints([]string{down(t), second.srv.URL}, nil)
	_, err = c.Do(context.Background(), http.MethodPost, "/v1/x", struct{}{}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, second.hits.Load())
}

func TestClientDoesNotFailOverOnClientErrors(t *testing.T) {
	first, second := newMember(t), newMember(t)
	first.status.Store(http.StatusNotFound)
	c := client.NewEndpoints([]string{first.srv.URL, second.srv.URL}, nil)
	require.Error(t, poll(c))
	require.EqualValues(t, 0, second.hits.Load())
}

func TestClientStopsWhenTheContextEnds(t *testing.T) {
	second := newMember(t)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	c := client.NewEndpoints([]string{hang.URL, second.srv.URL}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.PollOperations(ctx, "c1", "n1", time.Second)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.EqualValues(t, 0, second.hits.Load())
}

func TestClientSingleEndpointErrorIsUnchanged(t *testing.T) {
	a := down(t)
	err := poll(client.New(a, nil))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "no coordinator endpoint answered")
	require.ErrorContains(t, err, a)
}

func TestParseEndpoints(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "http://a:7080", want: []string{"http://a:7080"}},
		{in: "http://a:7080/, https://b:7080 ,,http://c", want: []string{"http://a:7080", "https://b:7080", "http://c"}},
		{in: "", wantErr: "no coordinator endpoint"},
		{in: " , ", wantErr: "no coordinator endpoint"},
		{in: "http://a,b:7080", wantErr: `"b:7080"`},
		{in: "ftp://a", wantErr: "want http(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := client.ParseEndpoints(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestPollTellsNoUpgradeFromUnknown: an answer without "upgrade" (a
// coordinator that predates it) decodes as nil, unlike one that says no
// upgrade is in progress ("") or names one.
func TestPollTellsNoUpgradeFromUnknown(t *testing.T) {
	var body atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body.Load().(string)))
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, nil)
	for _, tt := range []struct {
		body string
		want *string
	}{
		{`{"operations":[]}`, nil},
		{`{"operations":[],"upgrade":""}`, ptr("")},
		{`{"operations":[{"id":"u1/n1/0/a1","kind":"ImportImages","upgrade":"u1"}],"upgrade":"u1"}`, ptr("u1")},
	} {
		body.Store(tt.body)
		resp, err := c.Poll(context.Background(), "c1", "n1", time.Second)
		require.NoError(t, err)
		require.Equal(t, tt.want, resp.Upgrade, tt.body)
	}
	ops, err := c.PollOperations(context.Background(), "c1", "n1", time.Second)
	require.NoError(t, err)
	require.Equal(t, "u1", ops[0].Upgrade)
}

func ptr(s string) *string { return &s }

// TestSpreadByStartsAtAHashedEndpoint: clients given the same endpoints
// and spread by different keys start at different members, all of them
// used; the same key always picks the same member, and the request goes
// there first.
func TestSpreadByStartsAtAHashedEndpoint(t *testing.T) {
	var hits [3]atomic.Int64
	var eps []string
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits[i].Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		eps = append(eps, srv.URL)
	}
	for n := range 300 {
		key := fmt.Sprintf("lab/w-%d", n)
		c := client.NewEndpoints(eps, nil)
		i := c.SpreadBy(key)
		require.Equal(t, i, client.NewEndpoints(eps, nil).SpreadBy(key), "the same key, the same member")
		require.Equal(t, i, c.Current())
		before := hits[i].Load()
		_, err := c.Do(t.Context(), http.MethodGet, "/x", nil, nil)
		require.NoError(t, err)
		require.Equal(t, before+1, hits[i].Load(), "the request went to the member of its key")
	}
	for i := range hits {
		require.Greater(t, hits[i].Load(), int64(60), "member %d got its share of 300", i)
	}
}
