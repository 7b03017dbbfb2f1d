package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// stateMetrics are the metrics NewCoordinatorCollector exports, in the order
// Describe sends them.
var stateMetrics = []string{
	ClusterInfo, ClusterUpgradePhase, MaintenancePaused,
	UpgradeStepState, UpgradeStepStarted, UpgradeStepExpected,
	PoolInfo, PoolUpgradePhase, PoolNodes, PoolGateRed, PoolFailedNodesBudget, PoolCloudWaiting,
	ClusterNodes, ClusterSkewViolation, ClusterEndOfSupport, ClusterBlockedPastEOS,
	ClusterAutoUpgradeState, ClusterAutoUpgradeFailures, ClusterAutoUpgradeNext, ClusterEndOfSupportUpgrade,
	SequenceStage, SequenceHeld, SequenceSoakEnd,
	AgentLastSeenAge, AgentMissing, NodeVersionDrift,
	RaftState, RaftTerm, RaftLastLogIndex, RaftCommitIndex, RaftAppliedIndex, RaftHasLeader,
	RaftHalted, RaftHaltedIndex, MemberInfo,
}

// coordinatorCollector reads a Source at every scrape. It holds no state of
// its own, which is what keeps the metrics from drifting from the state.
type coordinatorCollector struct {
	src   Source
	descs map[string]*prometheus.Desc
}

// NewCoordinatorCollector returns a collector that exports the state metrics
// (see Catalog) from src at scrape time.
//
// Raft metrics come from every member. Cluster, pool, step and agent state
// comes only from the leader (RaftView().Leader): a follower's replica may
// lag, and exporting one copy per cluster keeps alert expressions free of
// de-duplication. After a leader change the new leader takes over the series;
// alerts' for: durations absorb the gap of an election.
func NewCoordinatorCollector(src Source) prometheus.Collector {
	c := &coordinatorCollector{src: src, descs: make(map[string]*prometheus.Desc, len(stateMetrics))}
	for _, name := range stateMetrics {
		m := lookup(name)
		c.descs[name] = prometheus.NewDesc(m.Name, m.Help, m.Labels, nil)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *coordinatorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, name := range stateMetrics {
		ch <- c.descs[name]
	}
}

// Collect implements prometheus.Collector.
func (c *coordinatorCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.src.RaftView()
	c.collectRaft(ch, r)
	if !r.Leader {
		return
	}
	seen := make(map[string]bool)
	for _, cl := range c.src.ClustersView() {
		// A duplicate label set would fail the whole scrape; keep the first.
		if !once(seen, "c", cl.Name) {
			continue
		}
		c.collectCluster(ch, cl, seen)
	}
	for _, sq := range c.src.SequencesView() {
		if !once(seen, "q", sq.Sequence, sq.Version) {
			continue
		}
		c.gauge(ch, SequenceStage, float64(sq.Reached), sq.Sequence, sq.Version)
		c.gauge(ch, SequenceHeld, b2f(sq.Held), sq.Sequence, sq.Version)
		if !sq.SoakEnds.IsZero() {
			c.gauge(ch, SequenceSoakEnd, unixSeconds(sq.SoakEnds), sq.Sequence, sq.Version)
		}
	}
	now := c.src.Now()
	for _, a := range c.src.AgentsView() {
		if !once(seen, "a", a.Cluster, a.Node) {
			continue
		}
		if !a.LastSeen.IsZero() {
			age := max(now.Sub(a.LastSeen).Seconds(), 0) // clock skew between members must not go negative
			c.gauge(ch, AgentLastSeenAge, age, a.Cluster, a.Node)
		}
		c.gauge(ch, AgentMissing, b2f(a.Missing), a.Cluster, a.Node)
		c.gauge(ch, NodeVersionDrift, b2f(a.Drift), a.Cluster, a.Node)
	}
}

func (c *coordinatorCollector) collectRaft(ch chan<- prometheus.Metric, r RaftView) {
	state := strings.ToLower(r.State)
	if state == "" && r.Leader {
		state = "leader"
	}
	c.oneHot(ch, RaftState, RaftStates, state)
	c.gauge(ch, RaftTerm, float64(r.Term))
	c.gauge(ch, RaftLastLogIndex, float64(r.LastIndex))
	c.gauge(ch, RaftCommitIndex, float64(r.CommitIndex))
	c.gauge(ch, RaftAppliedIndex, float64(r.AppliedIndex))
	c.gauge(ch, RaftHasLeader, b2f(r.HasLeader))
	c.gauge(ch, RaftHalted, b2f(r.Halted))
	c.gauge(ch, RaftHaltedIndex, float64(r.HaltedIndex))
	if r.Leader {
		seen := map[string]bool{}
		for _, m := range r.Members {
			if once(seen, m.ID) {
				c.gauge(ch, MemberInfo, 1, m.ID, m.Version, m.Source)
			}
		}
	}
}

func (c *coordinatorCollector) collectCluster(ch chan<- prometheus.Metric, cl ClusterView, seen map[string]bool) {
	n := cl.Name
	c.gauge(ch, ClusterInfo, 1, n, cl.Version, cl.TargetVersion)
	c.oneHot(ch, ClusterUpgradePhase, ClusterPhases, cl.Phase, n)
	if cl.Phase == "paused" {
		c.gauge(ch, MaintenancePaused, 1, n, cl.PauseReason)
	} else {
		c.gauge(ch, MaintenancePaused, 0, n, "")
	}
	for _, s := range cl.Steps {
		if !once(seen, "s", n, s.Name) {
			continue
		}
		c.oneHot(ch, UpgradeStepState, StepStates, s.State, n, s.Name)
		if !s.StartedAt.IsZero() {
			c.gauge(ch, UpgradeStepStarted, unixSeconds(s.StartedAt), n, s.Name)
		}
		if s.Expected > 0 {
			c.gauge(ch, UpgradeStepExpected, s.Expected.Seconds(), n, s.Name)
		}
	}
	for _, p := range cl.Pools {
		if !once(seen, "p", n, p.Name) {
			continue
		}
		c.gauge(ch, PoolInfo, 1, n, p.Name, p.Role)
		c.oneHot(ch, PoolUpgradePhase, PoolPhases, p.Phase, n, p.Name)
		pending := max(p.NodesTotal-p.NodesDone-p.NodesUpgrading-p.NodesFailed, 0)
		for state, v := range map[string]int{
			"pending": pending, "upgrading": p.NodesUpgrading, "done": p.NodesDone, "failed": p.NodesFailed,
		} {
			c.gauge(ch, PoolNodes, float64(v), n, p.Name, state)
		}
		for _, g := range p.Gates {
			c.gauge(ch, PoolGateRed, float64(p.Red[g]), n, p.Name, g)
		}
		if p.MaxFailedNodes > 0 {
			c.gauge(ch, PoolFailedNodesBudget, float64(p.MaxFailedNodes), n, p.Name)
		}
		if p.Cloud {
			for _, reason := range CloudWaitReasons {
				c.gauge(ch, PoolCloudWaiting, float64(p.Waiting[reason]), n, p.Name, reason)
			}
		}
	}
	for version, count := range cl.NodesPerVersion {
		c.gauge(ch, ClusterNodes, float64(count), n, version)
	}
	c.gauge(ch, ClusterSkewViolation, b2f(cl.SkewViolation), n)
	if !cl.EndOfSupport.IsZero() {
		c.gauge(ch, ClusterEndOfSupport, unixSeconds(cl.EndOfSupport), n)
	}
	c.gauge(ch, ClusterBlockedPastEOS, b2f(cl.MinorBlockedPastEOS), n)
	c.oneHot(ch, ClusterAutoUpgradeState, AutoUpgradeStates, cl.AutoUpgradeState, n)
	c.gauge(ch, ClusterAutoUpgradeFailures, float64(cl.AutoUpgradeFailures), n)
	if !cl.AutoUpgradeNextAttempt.IsZero() {
		c.gauge(ch, ClusterAutoUpgradeNext, unixSeconds(cl.AutoUpgradeNextAttempt), n)
	}
	if !cl.EndOfSupportUpgrade.IsZero() {
		c.gauge(ch, ClusterEndOfSupportUpgrade, unixSeconds(cl.EndOfSupportUpgrade), n)
	}
}

// oneHot exports one series per value of set: 1 for current, 0 for the
// rest; a current value outside set is exported as Unknown. Exporting the
// zeros keeps "== 0" and absent() apart and keeps the series count fixed.
func (c *coordinatorCollector) oneHot(ch chan<- prometheus.Metric, name string, set []string, current string, labels ...string) {
	known := false
	for _, v := range set {
		known = known || v == current
	}
	if !known {
		current = Unknown
	}
	for _, v := range set {
		c.gauge(ch, name, b2f(v == current), append(labels[:len(labels):len(labels)], v)...)
	}
}

func (c *coordinatorCollector) gauge(ch chan<- prometheus.Metric, name string, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v, labels...)
}

// once reports whether key is new in seen, recording it.
func once(seen map[string]bool, key ...string) bool {
	k := strings.Join(key, "\x00")
	if seen[k] {
		return false
	}
	seen[k] = true
	return true
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
