package agent

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// fakeMetrics records every Metrics call.
type fakeMetrics struct {
	mu         sync.Mutex
	ops        []string // "kind/result"
	durations  []time.Duration
	hbOK       []time.Time
	hbFailures int
	artifacts  map[string]int64 // bytes by source
}

func (m *fakeMetrics) Operation(kind, result string, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ops = append(m.ops, kind+"/"+result)
	m.durations = append(m.durations, d)
}

func (m *fakeMetrics) HeartbeatSucceeded(at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hbOK = append(m.hbOK, at)
}

func (m *fakeMetrics) HeartbeatFailed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hbFailures++
}

func (m *fakeMetrics) ArtifactBytes(source string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.artifacts == nil {
		m.artifacts = map[string]int64{}
	}
	m.artifacts[source] += n
}

func (m *fakeMetrics) artifactBytes(source string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.artifacts[source]
}

func (m *fakeMetrics) snapshot() (ops []string, durations []time.Duration, ok, failed int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.ops...), append([]time.Duration(nil), m.durations...), len(m.hbOK), m.hbFailures
}

// TestMetricsObserveOperationsAndHeartbeats runs a succeeding and a
// failing operation and then takes the coordinator away: each finished
// operation is counted once with its kind, result and duration, and
// heartbeats are counted as they succeed and then fail.
func TestMetricsObserveOperationsAndHeartbeats(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	m := &fakeMetrics{}
	h.cfg.Metrics = m
	stop, _ := runAgent(t, h.cfg)

	addr := strings.TrimPrefix(coord.URL, "https://")
	coord.enqueue(api.Operation{ID: "probe", Kind: api.OpProbePeers, ProbePeers: &api.ProbePeers{Addresses: []string{addr}}})
	require.Equal(t, api.OpSucceeded, coord.waitResult(t, "probe").State)
	coord.enqueue(api.Operation{ID: "nobody", Kind: api.OpProbePeers}) // no body: refused
	require.Equal(t, api.OpFailed, coord.waitResult(t, "nobody").State)

	require.Eventually(t, func() bool { _, _, ok, _ := m.snapshot(); return ok >= 2 }, 10*time.Second, 10*time.Millisecond)
	ops, durations, _, failed := m.snapshot()
	require.Equal(t, []string{"ProbePeers/succeeded", "ProbePeers/failed"}, ops)
	for _, d := range durations {
		require.GreaterOrEqual(t, d, time.Duration(0))
	}
	require.Zero(t, failed, "no heartbeat failed while the coordinator was up")

	coord.Close()
	require.Eventually(t, func() bool { _, _, _, f := m.snapshot(); return f >= 1 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, stop())
	ops, _, _, _ = m.snapshot()
	require.Len(t, ops, 2, "an operation is counted once")
}

// TestNilMetrics: an agent without Metrics runs as before.
func TestNilMetrics(t *testing.T) {
	coord := newFakeCoordinator(t)
	h := newFakeHost(t, coord)
	h.cfg.Metrics = nil
	runAgent(t, h.cfg)
	coord.enqueue(api.Operation{ID: "nobody", Kind: api.OpProbePeers})
	require.Equal(t, api.OpFailed, coord.waitResult(t, "nobody").State)
}
