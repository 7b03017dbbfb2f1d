package lab

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummarizeFindsTheLongestRunOfFailures(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Sent every 50 ms, listed out of order (requests finish out of order).
	rs := []probeResult{
		{at(100), ""}, {at(0), ""}, {at(50), ""},
		{at(150), "refused"}, {at(200), "refused"}, {at(250), ""}, // 100 ms
		{at(300), "timeout"}, {at(350), ""}, // 50 ms
		{at(400), "reset"}, {at(450), "reset"}, {at(500), "reset"}, // to the end: 100 ms
	}
	r := summarize("service", rs)
	require.Equal(t, 11, r.Sent)
	require.Equal(t, 6, r.Failed)
	require.Equal(t, 100*time.Millisecond, r.LongestOutage)
	require.Equal(t, at(150), r.LongestOutageFrom, "the first of the longest runs")
	require.Len(t, r.Failures, 6)
	require.Equal(t, at(150), r.Failures[0].At, "failures in the order sent")
	require.Equal(t, []ProbeOutage{{at(150), at(250), 2}, {at(300), at(350), 1}, {at(400), at(500), 3}}, r.Outages, "every run of failures")
	require.Contains(t, r.String(), "service: 11 requests, 6 failed, longest outage 100ms from 20:00:00.150 (first: 20:00:00.150 refused;")

	clean := summarize("lb", []probeResult{{at(0), ""}, {at(50), ""}})
	require.Equal(t, ProbeReport{Name: "lb", Sent: 2}, clean)
	require.Equal(t, "lb: 2 requests, 0 failed, longest outage 0s", clean.String())
}

func TestProbeCountsFailuresOfARealServer(t *testing.T) {
	for _, tc := range []struct {
		answer  string
		status  int
		failAll bool
	}{
		{"pod=echo-1 node=worker-1", http.StatusOK, false},
		{"someone else", http.StatusOK, true},
		{"pod=echo-1 but down", http.StatusServiceUnavailable, true},
	} {
		var n atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.answer))
		}))
		p := StartProbe(context.Background(), ProbeConfig{Name: "t", URL: srv.URL, Expect: "pod=", Rate: 200,
			Transport: &http.Transport{DisableKeepAlives: true}})
		require.Eventually(t, func() bool { return n.Load() >= 10 }, 10*time.Second, 5*time.Millisecond)
		r := p.Stop()
		srv.Close()
		require.GreaterOrEqual(t, r.Sent, 9, tc.answer)
		require.LessOrEqual(t, int64(r.Sent), n.Load(), "requests cut short by Stop are not counted")
		if tc.failAll {
			require.Equal(t, r.Sent, r.Failed, tc.answer)
			require.Greater(t, r.LongestOutage, time.Duration(0), tc.answer)
		} else {
			require.Zero(t, r.Failed, "%v", r)
		}
	}
}

// A failed request says how far it got: a timeout alone reads "awaiting
// headers" whether the DNS answer, the connection or the answer was late.
func TestProbeFailureNamesItsPhase(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	cfg := ProbeConfig{URL: srv.URL, Expect: "pod="}
	client := &http.Client{Timeout: 100 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	msg := askOnce(context.Background(), client, cfg)
	require.Contains(t, msg, "Client.Timeout exceeded")
	require.Contains(t, msg, "[in awaiting the answer since +")

	dialing := &http.Client{Timeout: 100 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			setPhase(ctx, "the DNS lookup of echo")
			<-ctx.Done()
			return nil, ctx.Err()
		}}}
	require.Contains(t, askOnce(context.Background(), dialing, cfg), "[in the DNS lookup of echo since +")
}
