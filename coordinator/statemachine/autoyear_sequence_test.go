package statemachine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
)

// yearEvent is something that happens at a moment of a simulated year.
type yearEvent struct {
	at time.Time
	do func()
}

// runUntil runs the simulated fleet as TestSimulatedYear does — the
// scheduler's passes until nothing changes, the upgrades' steps every ten
// simulated minutes, else a jump to the next event or wake — until end.
func (s *yearSim) runUntil(end time.Time, limits schedule.Limits, events []yearEvent) {
	for s.now.Before(end) {
		for len(events) > 0 && !events[0].at.After(s.now) {
			events[0].do()
			events = events[1:]
		}
		wake, changed := s.pass(limits)
		for changed {
			wake, changed = s.pass(limits)
		}
		if s.progress() {
			s.now = s.now.Add(10 * time.Minute)
			continue
		}
		next := s.now.Add(24 * time.Hour)
		if len(events) > 0 && events[0].at.Before(next) {
			next = events[0].at
		}
		if !wake.IsZero() && wake.After(s.now) && wake.Before(next) {
			next = wake
		}
		if !next.After(s.now) {
			next = s.now.Add(time.Minute)
		}
		s.now = next
	}
}

// reached is when cluster name's upgrade to v finished done (zero: never).
func (s *yearSim) reached(name string, v phases.Version) time.Time {
	r, err := s.m.Cluster(name)
	require.NoError(s.t, err)
	for _, h := range r.History {
		if h.To == v.String() && h.State == "done" {
			return h.FinishedAt
		}
	}
	if u := r.Upgrade; u != nil && u.To == v && u.State == phases.UpgradeDone {
		return u.FinishedAt
	}
	return time.Time{}
}

// TestSimulatedYearRolloutSequence extends the simulated year with a
// rollout sequence of three stages over twelve clusters, each with its
// own window: dev (named, 2 days' soak), staging (named, 3 days' soak)
// and production (selected by the label env=production). Three versions
// go through it: 1.33.4 in January, 1.33.6 in February (planned by the dry
// run the moment it becomes the target, and the plan is held to what
// happens), and 1.34.2 in April, whose upgrade fails on a staging cluster
// and rolls back: production waits for it until an operator resumes the
// stage, though the cluster's retry succeeded long before.
func TestSimulatedYearRolloutSequence(t *testing.T) {
	at := func(month time.Month, day, hour int) time.Time {
		return time.Date(2027, month, day, hour, 0, 0, 0, time.UTC)
	}
	jan1 := at(1, 1, 0)
	s := &yearSim{t: t, m: New(), now: jan1, clusters: map[string]*yearCluster{}, refuse: map[string]int{}, refusals: map[string][]time.Time{},
		failTo: map[string]string{"s2": "1.34.2"}}
	v := phases.MustParseVersion
	eos := at(12, 31, 0).AddDate(1, 0, 0)
	for _, r := range []string{"1.33.2", "1.33.4"} {
		s.must(PutReleaseCmd{Release: yearRelease(r, eos), Now: s.now})
	}
	s.must(PutChannelCmd{Channel: "regular", DefaultVersion: v("1.33.4"), AutoUpgradeTarget: v("1.33.4"), Now: s.now})

	weekly := func(d time.Weekday, hour, hours int) *winSpec { return &winSpec{weekday: d, hour: hour, hours: hours} }
	daily := func(hour, hours int) *winSpec { return &winSpec{daily: true, hour: hour, hours: hours} }
	prod := map[string]string{"env": "production"}
	rollback := phases.UpgradeSettings{Rollback: phases.RollbackAuto}
	stages := map[string][]*yearCluster{
		"dev": {
			{name: "d1", win: daily(2, 12)}, {name: "d2", win: weekly(time.Monday, 0, 24)},
			{name: "d3", win: daily(14, 8)}, {name: "d4", win: weekly(time.Thursday, 6, 12)},
		},
		"staging": {
			{name: "s1", win: daily(20, 8)}, {name: "s2", win: weekly(time.Tuesday, 0, 24), workerSettings: rollback},
			{name: "s3", win: weekly(time.Saturday, 8, 12)}, {name: "s4", win: daily(4, 12)},
		},
		"production": {
			{name: "p1", win: weekly(time.Sunday, 0, 24), labels: prod}, {name: "p2", win: weekly(time.Wednesday, 10, 12), labels: prod},
			{name: "p3", win: daily(1, 8), labels: prod}, {name: "p4", win: weekly(time.Friday, 0, 24), labels: prod},
		},
	}
	order := []string{"dev", "staging", "production"}
	stageOf := map[string]string{}
	for _, st := range order {
		for _, c := range stages[st] {
			c.kind, c.channel, c.version, c.workers = phases.KindStandalone, "regular", "1.33.2", 1
			s.register(c)
			stageOf[c.name] = st
		}
	}
	soak := map[string]time.Duration{"dev": 48 * time.Hour, "staging": 72 * time.Hour, "production": 0}
	s.must(PutSequenceCmd{Name: "fleet", Stages: []StageRecord{
		{Name: "dev", Clusters: []string{"d1", "d2", "d3", "d4"}, Soak: soak["dev"]},
		{Name: "staging", Clusters: []string{"s1", "s2", "s3", "s4"}, Soak: soak["staging"]},
		{Name: "production", Selector: prod},
	}, Now: s.now})

	var plan schedule.SequencePlan
	said := map[string]schedule.Status{}
	status := func(name string) {
		st, err := s.m.UpgradeStatus(name, s.now, schedule.Limits{})
		require.NoError(t, err)
		said[name] = st
	}
	resumedAt := at(4, 26, 9)
	s.runUntil(at(6, 1, 0), schedule.Limits{}, []yearEvent{
		{at(2, 1, 9), func() {
			s.must(PutReleaseCmd{Release: yearRelease("1.33.6", eos), Now: s.now})
			s.must(PutChannelCmd{Channel: "regular", DefaultVersion: v("1.33.6"), AutoUpgradeTarget: v("1.33.6"), Now: s.now})
			var err error
			plan, err = s.m.PlanSequence("fleet", v("1.33.6"), schedule.Limits{}, phases.DefaultDurations(), phases.Options{ConcurrentWorkerPools: 1}, s.now)
			require.NoError(t, err)
		}},
		{at(4, 5, 9), func() {
			s.must(PutReleaseCmd{Release: yearRelease("1.34.2", eos), Now: s.now})
			s.must(PutChannelCmd{Channel: "regular", DefaultVersion: v("1.34.2"), AutoUpgradeTarget: v("1.34.2"), Now: s.now})
		}},
		{at(4, 25, 9), func() { status("p1"); status("s2") }},
		{resumedAt, func() {
			s.must(SequenceOverrideCmd{Sequence: "fleet", Stage: "staging", Version: v("1.34.2"), Action: schedule.OverrideResume,
				Reason: "s2's failure was its host's disk", Now: s.now})
		}},
	})
	for _, st := range s.starts {
		t.Logf("%s %-3s %-10s %s → %s", st.at.Format("2006-01-02 15:04 Mon"), st.cluster, stageOf[st.cluster], st.from, st.to)
	}

	// Everyone went through all three versions.
	for name := range stageOf {
		r, err := s.m.Cluster(name)
		require.NoError(t, err)
		require.Equal(t, "1.34.2", r.StatusVersion.String(), name)
	}

	// No cluster of a stage started a version before every cluster of the
	// stage before it had reached it and the soak had passed.
	for _, ver := range []string{"1.33.4", "1.33.6", "1.34.2"} {
		for k := 1; k < len(order); k++ {
			var done time.Time
			for _, c := range stages[order[k-1]] {
				fin := s.reached(c.name, v(ver))
				require.False(t, fin.IsZero(), "%s never reached %s", c.name, ver)
				done = latest(done, fin)
			}
			opens := done.Add(soak[order[k-1]])
			if ver == "1.34.2" && order[k] == "production" {
				opens = latest(opens, resumedAt)
			}
			started := map[string]bool{}
			for _, st := range s.starts {
				if stageOf[st.cluster] != order[k] || st.to.String() != ver {
					continue
				}
				started[st.cluster] = true
				require.False(t, st.at.Before(opens), "%s (stage %s) started %s at %s, before stage %s had reached it and soaked (%s)",
					st.cluster, order[k], ver, st.at, order[k-1], opens)
			}
			require.Len(t, started, 4, "stage %s started %s on each of its clusters", order[k], ver)
		}
	}

	// The failure in staging: s2's first upgrade to 1.34.2 failed and
	// rolled back; its retry finished well before the operator resumed,
	// and production waited for the resume, saying why.
	seq, err := s.m.Sequence("fleet")
	require.NoError(t, err)
	require.Len(t, seq.Failures, 1)
	require.Equal(t, "s2", seq.Failures[0].Cluster)
	require.Equal(t, "1.34.2", seq.Failures[0].Version.String())
	require.True(t, s.reached("s2", v("1.34.2")).Add(soak["staging"]).Before(resumedAt), "the retry soaked before the resume: only the hold kept production waiting")
	p1 := said["p1"]
	require.Equal(t, schedule.StateWaitingForStage, p1.State)
	require.NotNil(t, p1.Sequence)
	require.True(t, p1.Sequence.Held)
	require.Equal(t, "staging", p1.Sequence.WaitsFor)
	require.Equal(t, []string{"s2"}, p1.Sequence.Failed)
	require.Equal(t, schedule.RuleSequenceHold, p1.BlockedBy[0].Name)
	require.Contains(t, p1.Message, "resumes or skips stage staging")
	require.Equal(t, schedule.StateUpToDate, said["s2"].State, "the stage itself carried on")

	// The plan of 1.33.6, made when it became the target, agrees with
	// what happened: each cluster started when planned, and the last
	// production cluster finished within one simulated step (10 minutes)
	// of the predicted finish.
	require.Empty(t, plan.Stopped)
	require.Len(t, plan.Clusters, 12)
	starts := map[string]time.Time{}
	for _, st := range s.starts {
		if st.to.String() == "1.33.6" {
			starts[st.cluster] = st.at
		}
	}
	for _, pc := range plan.Clusters {
		t.Logf("plan %-3s %-10s start %s (was %s) finish %s (was %s) outlasts %v", pc.Cluster, pc.Stage, pc.Start.Format(time.RFC3339),
			starts[pc.Cluster].Format(time.RFC3339), pc.Finish.Format(time.RFC3339), s.reached(pc.Cluster, v("1.33.6")).Format(time.RFC3339), pc.OutlastsWindow)
	}
	var last time.Time
	for _, pc := range plan.Clusters {
		fin := s.reached(pc.Cluster, v("1.33.6"))
		require.False(t, pc.OutlastsWindow, "%s: the plan holds where no upgrade outlasts its window", pc.Cluster)
		require.Equal(t, starts[pc.Cluster], pc.Start, "%s's start", pc.Cluster)
		require.InDelta(t, 0, fin.Sub(pc.Finish).Minutes(), 10, "%s's finish", pc.Cluster)
		if pc.Stage == "production" {
			last = latest(last, fin)
		}
	}
	t.Logf("MEASURED rollout sequence plan of 1.33.6: predicted finish %s, simulated %s", plan.Finish.Format(time.RFC3339), last.Format(time.RFC3339))
	require.InDelta(t, 0, last.Sub(plan.Finish).Minutes(), 10, "predicted and simulated finish of the last production cluster")
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
