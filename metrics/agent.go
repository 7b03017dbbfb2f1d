package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// AgentMetrics records molt-agent's metrics. One agent runs per host, so no
// metric carries a node label: the scrape target's labels name the host.
// Its methods are safe for concurrent use.
type AgentMetrics struct {
	operations        *prometheus.CounterVec
	operationDuration *prometheus.HistogramVec
	heartbeatSuccess  prometheus.Gauge
	heartbeatFailures prometheus.Counter
	artifactBytes     *prometheus.CounterVec
}

// NewAgentMetrics creates the agent's metrics and registers them with reg;
// a nil reg registers nothing. It panics on double registration.
func NewAgentMetrics(reg prometheus.Registerer) *AgentMetrics {
	f := promauto.With(reg)
	return &AgentMetrics{
		operations:        counterVec(f, AgentOperationsTotal),
		operationDuration: histogramVec(f, AgentOperationDuration, agentOperationBuckets),
		heartbeatSuccess:  gauge(f, AgentHeartbeatLastSuccess),
		heartbeatFailures: counter(f, AgentHeartbeatFailuresTotal),
		artifactBytes:     counterVec(f, AgentArtifactBytesTotal),
	}
}

// Operation records one finished typed operation: its kind (the api
// OperationKind), result ("succeeded", "failed") and duration.
func (m *AgentMetrics) Operation(kind, result string, d time.Duration) {
	m.operations.WithLabelValues(kind, result).Inc()
	m.operationDuration.WithLabelValues(kind).Observe(d.Seconds())
}

// HeartbeatSucceeded records a heartbeat the coordinator accepted at at.
func (m *AgentMetrics) HeartbeatSucceeded(at time.Time) {
	m.heartbeatSuccess.Set(unixSeconds(at))
}

// HeartbeatFailed records a heartbeat that did not reach the coordinator.
func (m *AgentMetrics) HeartbeatFailed() {
	m.heartbeatFailures.Inc()
}

// ArtifactBytes records n bytes of release artifacts the agent got from
// source ("network" or "stage").
func (m *AgentMetrics) ArtifactBytes(source string, n int64) {
	m.artifactBytes.WithLabelValues(source).Add(float64(n))
}
