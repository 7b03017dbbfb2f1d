package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/version"
)

// TestListenerServesMetricsAndHealthz starts the listener on a free port,
// records what the agent would, and scrapes it.
func TestListenerServesMetricsAndHealthz(t *testing.T) {
	reg, m := newRegistry()
	l, err := listen("127.0.0.1:0", newHandler(reg), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(l.close)
	base := "http://" + l.addr.String()

	m.Operation("ProbePeers", "succeeded", 2*time.Second)
	m.HeartbeatSucceeded(time.Unix(1700000000, 0))
	m.HeartbeatFailed()
	m.ArtifactBytes("stage", 42)

	body, code := get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{
		`molt_agent_operations_total{kind="ProbePeers",result="succeeded"} 1`,
		`molt_agent_operation_duration_seconds_count{kind="ProbePeers"} 1`,
		`molt_agent_last_heartbeat_success_timestamp_seconds 1.7e+09`,
		`molt_agent_heartbeat_failures_total 1`,
		`molt_agent_artifact_bytes_total{source="stage"} 42`,
		`molt_build_info{commit="` + version.Get().Commit + `",goversion="` + runtime.Version() + `",version="` + version.Version + `"} 1`,
		`go_goroutines `,
		`process_resident_memory_bytes `,
	} {
		require.Contains(t, body, want)
	}

	body, code = get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok", body)

	_, code = get(t, base+"/nothing")
	require.Equal(t, http.StatusNotFound, code)
}

// TestListenerClose: after close the port no longer answers.
func TestListenerClose(t *testing.T) {
	reg, _ := newRegistry()
	l, err := listen("127.0.0.1:0", newHandler(reg), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	_, code := get(t, "http://"+l.addr.String()+"/healthz")
	require.Equal(t, http.StatusOK, code)
	l.close()
	_, err = net.DialTimeout("tcp", l.addr.String(), time.Second)
	require.Error(t, err)
}

// TestListenTakenPort: a port in use fails at once.
func TestListenTakenPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = busy.Close() })
	_, err = listen(busy.Addr().String(), http.NotFoundHandler(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.ErrorContains(t, err, "--listen")
}

func get(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // test against a local server
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b), resp.StatusCode
}

// TestListenerBoundsConnections: with maxConns connections open that send
// nothing, one more is closed at once and counted, and once they are gone
// the listener serves again.
func TestListenerBoundsConnections(t *testing.T) {
	reg, _ := newRegistry()
	l, err := listen("127.0.0.1:0", newHandler(reg), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(l.close)
	var idle []net.Conn
	for range maxConns {
		c, err := net.Dial("tcp", l.addr.String())
		require.NoError(t, err)
		idle = append(idle, c)
	}
	extra, err := net.Dial("tcp", l.addr.String())
	require.NoError(t, err)
	defer extra.Close()
	require.Eventually(t, func() bool { return l.refused.Load() > 0 }, 30*time.Second, 10*time.Millisecond, "no connection refused")
	_, err = extra.Read(make([]byte, 1))
	require.Error(t, err, "the connection beyond the bound is closed")

	for _, c := range idle {
		c.Close()
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + l.addr.String() + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 10*time.Millisecond, "the listener does not serve again")
}
