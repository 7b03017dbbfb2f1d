package metrics

import (
	"time"

	"github.com/moltproject/molt/internal/version"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Recorder records the coordinator's event metrics. Its methods are safe for
// concurrent use. Durations are measured by the caller (from its clock) and
// passed in, so recording never reads the time itself.
type Recorder struct {
	nodeUpgradeDuration *prometheus.HistogramVec
	nodeUpgrades        *prometheus.CounterVec
	drainDuration       *prometheus.HistogramVec
	drainTimeouts       *prometheus.CounterVec
	podsLeftBehind      *prometheus.CounterVec
	preflightChecks     *prometheus.CounterVec
	raftCommit          prometheus.Histogram
	leaderChanges       prometheus.Counter
	agentOperations     *prometheus.CounterVec
	nodeRollbacks       *prometheus.CounterVec
	gateChecks          *prometheus.CounterVec
	handshakesRefused   *prometheus.CounterVec
	buildInfo           *prometheus.GaugeVec
}

// NewRecorder creates the coordinator's event metrics and registers them
// with reg; a nil reg registers nothing (useful in tests of other packages).
// It panics if the metrics are already registered with reg, as
// prometheus.MustRegister does: that is a wiring bug found at start-up.
func NewRecorder(reg prometheus.Registerer) *Recorder {
	f := promauto.With(reg)
	return &Recorder{
		nodeUpgradeDuration: histogramVec(f, NodeUpgradeDuration, nodeUpgradeBuckets),
		nodeUpgrades:        counterVec(f, NodeUpgradesTotal),
		drainDuration:       histogramVec(f, DrainDuration, drainBuckets),
		drainTimeouts:       counterVec(f, DrainTimeoutsTotal),
		podsLeftBehind:      counterVec(f, DrainPodsLeftBehindTotal),
		preflightChecks:     counterVec(f, PreflightChecksTotal),
		raftCommit:          histogram(f, RaftCommitDuration, raftCommitBuckets),
		leaderChanges:       counter(f, RaftLeaderChangesTotal),
		agentOperations:     counterVec(f, AgentOperationsReported),
		nodeRollbacks:       counterVec(f, NodeRollbacksTotal),
		gateChecks:          counterVec(f, HealthGateChecksTotal),
		handshakesRefused:   handshakesRefused(f),
		buildInfo:           buildInfo(f),
	}
}

// RegisterBuildInfo registers molt_build_info with reg, for a binary
// that serves metrics without a Recorder (molt-agent): NewRecorder
// registers it for the coordinator.
func RegisterBuildInfo(reg prometheus.Registerer) { buildInfo(promauto.With(reg)) }

// buildInfo sets molt_build_info to 1 with this binary's release as labels,
// the Prometheus convention for a version: join on it, count by version.
func buildInfo(f promauto.Factory) *prometheus.GaugeVec {
	m := lookup(BuildInfo)
	g := f.NewGaugeVec(prometheus.GaugeOpts{Name: m.Name, Help: m.Help}, m.Labels)
	i := version.Get()
	g.WithLabelValues(i.Version, i.Commit, i.GoVersion).Set(1)
	return g
}

// handshakesRefused creates the refusal counter with every listener and
// reason at 0, so that the first refusal is an increase() can see.
func handshakesRefused(f promauto.Factory) *prometheus.CounterVec {
	v := counterVec(f, HandshakesRefusedTotal)
	for _, l := range Listeners {
		for _, r := range HandshakeReasons {
			v.WithLabelValues(l, r)
		}
	}
	return v
}

// NodeUpgraded records one finished node upgrade (cordon to uncordon) in a
// pool; ok is false when the node's upgrade failed.
func (r *Recorder) NodeUpgraded(cluster, pool string, d time.Duration, ok bool) {
	result := ResultFailed
	if ok {
		result = ResultSucceeded
	}
	// Create both result series on the first upgrade of a pool, so that the
	// first failure is an increase from 0 that increase() can see.
	r.nodeUpgrades.WithLabelValues(cluster, pool, ResultSucceeded).Add(0)
	r.nodeUpgrades.WithLabelValues(cluster, pool, ResultFailed).Add(0)
	r.nodeUpgrades.WithLabelValues(cluster, pool, result).Inc()
	r.nodeUpgradeDuration.WithLabelValues(cluster, pool, result).Observe(d.Seconds())
}

// Drained records one finished drain. timedOut is true when the drain hit its
// timeout and the upgrade went on; leftBehind counts the pods left on the
// node by reason code (e.g. "pdb", "terminating").
func (r *Recorder) Drained(cluster, pool string, d time.Duration, timedOut bool, leftBehind map[string]int) {
	r.drainDuration.WithLabelValues(cluster, pool).Observe(d.Seconds())
	// Creating the series at 0 on the pool's first drain lets increase()
	// see the first timeout.
	timeouts := r.drainTimeouts.WithLabelValues(cluster, pool)
	if timedOut {
		timeouts.Inc()
	}
	for reason, n := range leftBehind {
		if n > 0 {
			r.podsLeftBehind.WithLabelValues(cluster, pool, reason).Add(float64(n))
		}
	}
}

// NodeRolledBack records one node of a pool taken back to the version
// before its upgrade (ok), or failing on its way back.
func (r *Recorder) NodeRolledBack(cluster, pool string, ok bool) {
	result := ResultFailed
	if ok {
		result = ResultSucceeded
	}
	r.nodeRollbacks.WithLabelValues(cluster, pool, ResultSucceeded).Add(0)
	r.nodeRollbacks.WithLabelValues(cluster, pool, ResultFailed).Add(0)
	r.nodeRollbacks.WithLabelValues(cluster, pool, result).Inc()
}

// Gate records one look at a node's health gate: green or red.
func (r *Recorder) Gate(cluster, pool, gate string, green bool) {
	result := "red"
	if green {
		result = "green"
	}
	r.gateChecks.WithLabelValues(cluster, pool, gate, result).Inc()
}

// PreflightCheck records one preflight check result ("pass", "warn", "fail").
func (r *Recorder) PreflightCheck(cluster, check, result string) {
	r.preflightChecks.WithLabelValues(cluster, check, result).Inc()
}

// RaftCommit records the time a Raft command took from proposal to commit.
func (r *Recorder) RaftCommit(d time.Duration) {
	r.raftCommit.Observe(d.Seconds())
}

// LeaderChange records that this member observed a new Raft leader.
func (r *Recorder) LeaderChange() {
	r.leaderChanges.Inc()
}

// HandshakeRefused records a connection that listener ("api", "raft")
// closed before its TLS handshake finished, and why ("limit", "timeout",
// "failed").
func (r *Recorder) HandshakeRefused(listener, reason string) {
	r.handshakesRefused.WithLabelValues(listener, reason).Inc()
}

// AgentOperation records the result of an agent operation as the agent
// reported it to the coordinator. The agent counts its own operations in
// AgentMetrics under a different name, so that summing across jobs never
// counts one operation twice.
func (r *Recorder) AgentOperation(kind, result string) {
	r.agentOperations.WithLabelValues(kind, result).Inc()
}

func counterVec(f promauto.Factory, name string) *prometheus.CounterVec {
	m := lookup(name)
	return f.NewCounterVec(prometheus.CounterOpts{Name: m.Name, Help: m.Help}, m.Labels)
}

func counter(f promauto.Factory, name string) prometheus.Counter {
	m := lookup(name)
	return f.NewCounter(prometheus.CounterOpts{Name: m.Name, Help: m.Help})
}

func histogramVec(f promauto.Factory, name string, buckets []float64) *prometheus.HistogramVec {
	m := lookup(name)
	return f.NewHistogramVec(prometheus.HistogramOpts{Name: m.Name, Help: m.Help, Buckets: buckets}, m.Labels)
}

func histogram(f promauto.Factory, name string, buckets []float64) prometheus.Histogram {
	m := lookup(name)
	return f.NewHistogram(prometheus.HistogramOpts{Name: m.Name, Help: m.Help, Buckets: buckets})
}

func gauge(f promauto.Factory, name string) prometheus.Gauge {
	m := lookup(name)
	return f.NewGauge(prometheus.GaugeOpts{Name: m.Name, Help: m.Help})
}
