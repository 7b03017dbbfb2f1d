package metrics

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// fakeSource is a Source whose views are plain fields.
type fakeSource struct {
	clusters []ClusterView
	agents   []AgentView
	seqs     []SequenceView
	raft     RaftView
	now      time.Time
}

func (f *fakeSource) ClustersView() []ClusterView   { return f.clusters }
func (f *fakeSource) AgentsView() []AgentView       { return f.agents }
func (f *fakeSource) SequencesView() []SequenceView { return f.seqs }
func (f *fakeSource) RaftView() RaftView            { return f.raft }
func (f *fakeSource) Now() time.Time                { return f.now }

var t0 = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

// leaderRaft is a healthy single-member leader.
var leaderRaft = RaftView{State: "Leader", Term: 3, LastIndex: 42, CommitIndex: 42, AppliedIndex: 41, Leader: true, HasLeader: true,
	Members: []MemberView{{ID: "m1", Version: "0.2.0", Source: "self"}, {ID: "m2", Version: "0.1.0", Source: "assumed"}}}

// tb is what the helpers below need; both *testing.T and *rapid.T have it,
// so property tests fail (and shrink) through rapid.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	FailNow()
}

// sample is one gathered series: its family name, its labels rendered as
// k=v pairs sorted by key, and its value.
type sample struct {
	name   string
	labels string
	value  float64
}

// gather registers cs on a pedantic registry (which checks descriptors
// against what is collected) and returns every series.
func gather(t tb, cs ...prometheus.Collector) []sample {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(cs...)
	return gatherFrom(t, reg)
}

func gatherFrom(t tb, g prometheus.Gatherer) []sample {
	t.Helper()
	mfs, err := g.Gather()
	require.NoError(t, err)
	var out []sample
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out = append(out, sample{mf.GetName(), renderLabels(m.GetLabel()), value(mf.GetType(), m)})
		}
	}
	return out
}

func renderLabels(lps []*dto.LabelPair) string {
	parts := make([]string, 0, len(lps))
	for _, lp := range lps {
		parts = append(parts, lp.GetName()+"="+lp.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func value(typ dto.MetricType, m *dto.Metric) float64 {
	switch typ {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	default:
		return m.GetGauge().GetValue()
	}
}

// hot returns, for family name, the labels of the series at 1 grouped by
// the labels other than oneHotLabel: group → the one-hot label's value. It
// fails the test when a group has not exactly one series at 1.
func hot(t tb, samples []sample, name, oneHotLabel string) map[string]string {
	t.Helper()
	ones := map[string][]string{}
	for _, s := range samples {
		if s.name != name {
			continue
		}
		var group []string
		var v string
		for _, kv := range strings.Split(s.labels, ",") {
			if k, val, _ := strings.Cut(kv, "="); k == oneHotLabel {
				v = val
			} else {
				group = append(group, kv)
			}
		}
		g := strings.Join(group, ",")
		if _, ok := ones[g]; !ok {
			ones[g] = nil
		}
		switch s.value {
		case 1:
			ones[g] = append(ones[g], v)
		case 0:
		default:
			t.Fatalf("%s{%s} = %v, want 0 or 1", name, s.labels, s.value)
		}
	}
	out := map[string]string{}
	for g, vs := range ones {
		require.Lenf(t, vs, 1, "%s{%s}: want exactly one %s at 1, got %v", name, g, oneHotLabel, vs)
		out[g] = vs[0]
	}
	return out
}

// find returns the value of the series name{labels}, failing if absent.
func find(t tb, samples []sample, name, labels string) float64 {
	t.Helper()
	for _, s := range samples {
		if s.name == name && s.labels == labels {
			return s.value
		}
	}
	t.Fatalf("no series %s{%s}", name, labels)
	return 0
}

func count(samples []sample, name string) int {
	n := 0
	for _, s := range samples {
		if s.name == name {
			n++
		}
	}
	return n
}

func steps(states ...string) []StepView {
	names := []string{"control_plane_lb", "control_plane", "addons", "lifecycle", "load_balancer", "workers", "health_checks"}
	out := make([]StepView, len(names))
	for i, n := range names {
		out[i] = StepView{Name: n, State: "pending"}
		if i < len(states) {
			out[i].State = states[i]
		}
		if out[i].State != "pending" {
			out[i].StartedAt = t0.Add(time.Duration(i) * time.Minute)
		}
	}
	return out
}

func nodeName(i int) string { return fmt.Sprintf("node-%03d", i) }
