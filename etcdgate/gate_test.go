package etcdgate

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// healthy is a three-member cluster led by cp-1 at raft index idx, every
// member caught up.
func healthy(at time.Duration, idx uint64) Sample {
	s := Sample{Time: t0.Add(at)}
	for i, n := range []string{"cp-1", "cp-2", "cp-3"} {
		s.Members = append(s.Members, Member{ID: uint64(i + 1), Name: n, Leader: 1, RaftIndex: idx, AppliedIndex: idx, Version: "3.6.4"})
	}
	return s
}

func with(s Sample, i int, f func(*Member)) Sample {
	s.Members = append([]Member(nil), s.Members...)
	f(&s.Members[i])
	return s
}

func TestDecide(t *testing.T) {
	prev := healthy(0, 100)
	tests := []struct {
		name string
		want int
		prev *Sample
		cur  Sample
		pass bool
		why  string
	}{
		{"caught up and advancing", 3, &prev, healthy(time.Second, 120), true, "3 members healthy and started, leader cp-1"},
		{"idle cluster passes", 3, &prev, healthy(time.Second, 100), true, ""},
		{"first sample holds", 3, nil, healthy(0, 100), false, "first sample"},
		{"member behind", 3, &prev, with(healthy(time.Second, 120), 1, func(m *Member) { m.RaftIndex, m.AppliedIndex = 110, 95 }), false, "member cp-2 raft index behind: applied 95 < leader's 100"},
		{"index went back", 3, &prev, with(healthy(time.Second, 120), 2, func(m *Member) { m.RaftIndex, m.AppliedIndex = 99, 99 }), false, "member cp-3 raft index went back"},
		{"member unreachable", 3, &prev, with(healthy(time.Second, 120), 1, func(m *Member) { m.Err = "connection refused" }), false, "member cp-2 unhealthy: connection refused"},
		{"alarm", 3, &prev, with(healthy(time.Second, 120), 0, func(m *Member) { m.Alarms = []string{"NOSPACE"} }), false, "member cp-1 unhealthy: NOSPACE"},
		{"not started", 3, &prev, with(healthy(time.Second, 120), 2, func(m *Member) { m.Name = "" }), false, "member 3 not started"},
		{"learner", 3, &prev, with(healthy(time.Second, 120), 2, func(m *Member) { m.IsLearner = true }), false, "member cp-3 is a learner"},
		{"no leader", 3, &prev, with(healthy(time.Second, 120), 0, func(m *Member) { m.Leader = 0 }), false, "member cp-1 has no leader"},
		{"two leaders", 3, &prev, with(healthy(time.Second, 120), 2, func(m *Member) { m.Leader = 3 }), false, "2 leaders seen"},
		{"leader not a member", 3, &prev, func() Sample {
			s := healthy(time.Second, 120)
			for i := range s.Members {
				s.Members[i].Leader = 9
			}
			return s
		}(), false, "leader 9 is not a member"},
		{"member lost", 3, &prev, Sample{Time: t0, Members: healthy(time.Second, 120).Members[:2]}, false, "member count 2, was 3"},
		{"member added", 2, &prev, healthy(time.Second, 120), false, "member count 3, was 2"},
		{"count unknown", 0, &prev, healthy(time.Second, 120), true, ""},
		{"no members", 3, &prev, Sample{Time: t0}, false, "no etcd member listed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.want, tt.prev, tt.cur)
			if d.Pass != tt.pass || !strings.Contains(d.Reason, tt.why) {
				t.Fatalf("Decide = %+v, want pass=%v with %q", d, tt.pass, tt.why)
			}
		})
	}
}

// TestWatchHeldWhileCatchingUp follows a member that restarted on a new
// version and replays its log: the gate holds until it applied what the
// leader had, and the summary says for how long and why.
func TestWatchHeldWhileCatchingUp(t *testing.T) {
	w := Watch{Want: 3}
	behind := func(at time.Duration, leader, cp2 uint64) Sample {
		return with(healthy(at, leader), 1, func(m *Member) { m.RaftIndex, m.AppliedIndex = cp2, cp2 })
	}
	steps := []struct {
		s    Sample
		pass bool
	}{
		{with(healthy(0, 100), 1, func(m *Member) { m.Err, m.RaftIndex, m.AppliedIndex = "connection refused", 0, 0 }), false},
		{behind(time.Second, 110, 50), false},
		{behind(2*time.Second, 120, 105), false},
		{healthy(3*time.Second, 130), true},
	}
	for i, st := range steps {
		if d := w.Observe(st.s); d.Pass != st.pass {
			t.Fatalf("sample %d: %+v, want pass=%v", i, d, st.pass)
		}
	}
	if w.Held() != 3*time.Second {
		t.Fatalf("Held = %s, want 3s", w.Held())
	}
	if got := w.Summary(); !strings.Contains(got, "held 3s over 3 samples; last: member cp-2 raft index behind: applied 105 < leader's 110") {
		t.Fatalf("Summary = %q", got)
	}

	down := Watch{Want: 3}
	down.Observe(healthy(0, 100))
	if d := down.Unreachable(t0.Add(time.Second), errors.New("context deadline exceeded")); d.Pass || d.Reason != "etcd unreachable: context deadline exceeded" {
		t.Fatalf("Unreachable = %+v", d)
	}
	if d := down.Observe(healthy(2*time.Second, 110)); !d.Pass {
		t.Fatalf("reachable again: %s", d.Reason)
	}
	if got := down.Summary(); got != "held 2s over 2 samples; last: etcd unreachable: context deadline exceeded" {
		t.Fatalf("Summary = %q", got)
	}

	fit := Watch{Want: 3}
	fit.Observe(healthy(0, 100))
	if d := fit.Observe(healthy(time.Second, 101)); !d.Pass {
		t.Fatalf("healthy cluster held: %s", d.Reason)
	}
	if got := fit.Summary(); got != "held 1s (the first sample only, which every run holds)" {
		t.Fatalf("Summary = %q", got)
	}
}
