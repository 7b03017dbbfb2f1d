package statemachine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
	"github.com/moltproject/molt/raftstore"
)

// The simulated year: a fleet on release channels for all of 2027, with
// the catalog, the channels and the policies changing over the months, on
// an injected clock. Every decision goes through the state machine as the
// leader's would (encoded commands applied by the registry's handlers):
// the scheduler's passes (schedule.Evaluate on SchedulerFleet) and the
// upgrades' own steps (phases.Decide behind schedule.Gate), each work
// item completing one simulated step (10 minutes) later. The oracle that
// judges windows and exclusions is written from the test's own window and
// exclusion specs, not from package maintenance.

// winSpec is a window the oracle understands: every day (weekday < 0) or
// one weekday, from hour for hours.
type winSpec struct {
	weekday     time.Weekday
	daily       bool
	hour, hours int
}

func (w winSpec) open(t time.Time) bool {
	t = t.UTC()
	for _, back := range []int{0, 1} { // an occurrence may have started the day before
		d := time.Date(t.Year(), t.Month(), t.Day()-back, w.hour, 0, 0, 0, time.UTC)
		if !w.daily && d.Weekday() != w.weekday {
			continue
		}
		if !t.Before(d) && t.Before(d.Add(time.Duration(w.hours)*time.Hour)) {
			return true
		}
	}
	return false
}

// window is the policy's form of w, first occurring in the first week of
// 2027.
func (w winSpec) window() *maintenance.Window {
	start := time.Date(2027, 1, 1, w.hour, 0, 0, 0, time.UTC)
	rule := "FREQ=DAILY"
	if !w.daily {
		for start.Weekday() != w.weekday {
			start = start.AddDate(0, 0, 1)
		}
		rule = "FREQ=WEEKLY;BYDAY=" + strings.ToUpper(w.weekday.String()[:2])
	}
	return &maintenance.Window{Start: start, End: start.Add(time.Duration(w.hours) * time.Hour), Recurrence: rule}
}

// blocks is the oracle's table of SPEC §9: does an active exclusion of
// scope s block a change of kind on target?
func blocks(s maintenance.Scope, kind maintenance.ChangeKind, target phases.Target) bool {
	switch s {
	case maintenance.ScopeNoMinorUpgrades:
		return kind == maintenance.KindMinor
	case maintenance.ScopeNoMinorOrNodeUpgrades:
		return kind == maintenance.KindMinor || target == phases.TargetNodes
	}
	return true
}

type yearCluster struct {
	name    string
	kind    phases.ClusterKind
	admin   string
	channel string
	version string
	workers int
	win     *winSpec
	excl    []maintenance.Exclusion
	// heldUntil is the end of its registration hold (registered without
	// a policy).
	heldUntil time.Time
	// labels are the cluster's labels; workerSettings its worker pool's
	// upgrade settings.
	labels         map[string]string
	workerSettings phases.UpgradeSettings
}

type yearStart struct {
	cluster string
	at      time.Time
	from    phases.Version
	to      phases.Version
	kind    maintenance.ChangeKind
	eos     bool
	reason  string
}

type yearSim struct {
	t        *testing.T
	m        *Machine
	idx      uint64
	now      time.Time
	clusters map[string]*yearCluster
	// refuse is how many more preflights of a cluster fail.
	refuse   map[string]int
	starts   []yearStart
	refusals map[string][]time.Time // when each refused attempt ended
	pauses   int
	resumes  int
	// nodeStarts counts automatic node starts the oracle judged.
	nodeStarts int
	// failTo makes the first worker node step of a cluster's upgrade to
	// that version fail, once.
	failTo map[string]string
}

func (s *yearSim) apply(cmd Command) (any, error) {
	s.t.Helper()
	b, err := raftstore.Encode(cmd)
	require.NoError(s.t, err)
	s.idx++
	return s.m.Handlers()[cmd.Type()](s.idx, b[1:])
}

func (s *yearSim) must(cmd Command) any {
	s.t.Helper()
	v, err := s.apply(cmd)
	require.NoError(s.t, err, "%s at %s", cmd.Type(), s.now)
	return v
}

func yearRelease(v string, eos time.Time) api.Release {
	sum := strings.Repeat("ab", 32)
	return api.Release{Version: v, EndOfSupport: eos, Components: api.ReleaseComponents{
		Kubelet:    api.BinaryArtifact{URL: "http://artifacts.test/kubelet-" + v, SHA256: sum},
		Containerd: api.BinaryArtifact{URL: "http://artifacts.test/containerd-" + v, SHA256: sum}}}
}

func (s *yearSim) register(c *yearCluster) {
	s.clusters[c.name] = c
	spec := phases.ClusterSpec{Name: c.name, Kind: c.kind, AdminCluster: c.admin, Channel: c.channel, Version: phases.MustParseVersion(c.version),
		Pools: []phases.Pool{{Name: "cp", Role: phases.RoleControlPlane, Nodes: []phases.Node{{Name: c.name + "-cp"}}}}, Labels: c.labels}
	w := phases.Pool{Name: "workers", Role: phases.RoleWorker, Settings: c.workerSettings}
	for i := range c.workers {
		w.Nodes = append(w.Nodes, phases.Node{Name: fmt.Sprintf("%s-w%d", c.name, i)})
	}
	spec.Pools = append(spec.Pools, w)
	// As the coordinator registers: the policy in the same entry, or,
	// without one, the registration hold of a day.
	cmd := PutClusterCmd{Spec: spec, Policy: c.policy(), Now: s.now}
	if cmd.Policy == nil {
		c.heldUntil = s.now.Add(24 * time.Hour)
		cmd.HoldUntil = c.heldUntil
	}
	s.must(cmd)
}

// policy is c's maintenance policy; nil when it has neither a window nor
// exclusions.
func (c *yearCluster) policy() *maintenance.Policy {
	if c.win == nil && len(c.excl) == 0 {
		return nil
	}
	p := maintenance.Policy{Exclusions: c.excl}
	if c.win != nil {
		p.Window = c.win.window()
	}
	return &p
}

func (s *yearSim) setPolicy(c *yearCluster) {
	if p := c.policy(); p != nil {
		s.must(SetPolicyCmd{Cluster: c.name, Policy: *p, Now: s.now})
		c.heldUntil = time.Time{}
	}
}

// allowed is the oracle: may an automatic change of kind on target run at
// t on cluster c?
func (s *yearSim) allowed(c *yearCluster, kind maintenance.ChangeKind, target phases.Target, t time.Time) bool {
	if t.Before(c.heldUntil) {
		return false
	}
	if c.win != nil && !c.win.open(t) {
		return false
	}
	for _, e := range c.excl {
		if !t.Before(e.Start) && t.Before(e.End) && blocks(e.Scope, kind, target) {
			return false
		}
	}
	return true
}

// pass runs the scheduler once and commits its decisions; each start is
// also proposed a second time, as a second leader would, and must be
// refused.
func (s *yearSim) pass(limits schedule.Limits) (time.Time, bool) {
	p := schedule.Evaluate(s.m.SchedulerFleet(limits), s.now)
	for _, d := range p.Records() {
		s.must(AutoRecordCmd{Cluster: d.Cluster, Upgrade: d.Record.Upgrade, Outcome: d.Record.Outcome, Now: s.now})
		if d.Record.Outcome == schedule.OutcomeRefused {
			s.refusals[d.Cluster] = append(s.refusals[d.Cluster], d.Record.FinishedAt)
		}
	}
	for _, d := range p.Starts() {
		r, err := s.m.Cluster(d.Cluster)
		require.NoError(s.t, err)
		run := &PreflightRun{ID: fmt.Sprintf("%s-%d", d.Cluster, r.PreflightSeq+1), Cluster: d.Cluster, Target: d.To, CreatedAt: s.now, Deadline: s.now.Add(2 * time.Minute)}
		cmd := AutoStartCmd{Cluster: d.Cluster, To: d.To, Kind: d.Kind, EndOfSupport: d.EndOfSupport, Reason: d.Reason, Seq: r.Seq, Limits: limits,
			// The molt layout: this year's timings were measured without a
			// backup step, whose duration plans do not model yet.
			Options: phases.Options{ConcurrentWorkerPools: 1, StepLayout: phases.StepLayoutMolt}, Preflight: run, Now: s.now}
		s.must(cmd)
		_, err = s.apply(cmd)
		require.ErrorIs(s.t, err, phases.ErrStale, "the same decision twice starts one upgrade")
		c := s.clusters[d.Cluster]
		if !d.EndOfSupport {
			require.True(s.t, s.allowed(c, d.Kind, phases.TargetControlPlane, s.now), "%s started %s → %s at %s outside its window or inside an exclusion", d.Cluster, r.StatusVersion, d.To, s.now)
		}
		s.starts = append(s.starts, yearStart{cluster: d.Cluster, at: s.now, from: r.StatusVersion, to: d.To, kind: d.Kind, eos: d.EndOfSupport, reason: d.Reason})
	}
	return p.Wake, len(p.Records())+len(p.Starts()) > 0
}

// progress moves every upgrade in progress by one step: a preflight
// finishes (passing, or failing while the cluster is set to refuse), a
// running upgrade commits Decide's transitions and completes the work it
// started. It reports whether anything still runs and can move.
func (s *yearSim) progress() bool {
	busy := false
	for _, r := range s.m.Clusters() {
		u := r.Upgrade
		if u == nil || !u.InProgress() {
			continue
		}
		c := s.clusters[r.Spec.Name]
		if u.State == phases.UpgradePreflight {
			rep := preflight.Report{Verdict: preflight.Passed}
			if s.refuse[c.name] > 0 {
				s.refuse[c.name]--
				rep = preflight.Report{Verdict: preflight.Failed, Failed: []string{preflight.IDNodesReady}}
			}
			s.must(PreflightFinishCmd{Cluster: c.name, Run: u.Preflight, Report: rep, Now: s.now})
			busy = true
			continue
		}
		var cp *maintenance.Compiled
		if r.Policy != nil {
			var err error
			cp, err = r.Policy.Compile()
			require.NoError(s.t, err)
		}
		d := phases.Decide(u, s.now, schedule.Gate(cp, false, u, s.now))
		var commits, work []phases.Action
		for _, a := range d.Actions {
			if a.Commits() {
				commits = append(commits, a)
			} else {
				work = append(work, a)
			}
		}
		for _, a := range commits {
			switch a.Kind {
			case phases.ActPause:
				s.pauses++
			case phases.ActResume:
				s.resumes++
			case phases.ActStartNode, phases.ActStartStep:
				if !u.Options.Automatic || u.Options.EndOfSupport {
					break
				}
				target := phases.TargetControlPlane
				if a.Kind == phases.ActStartNode && a.Pool == "workers" || a.Kind == phases.ActStartStep && a.Step == "pool/workers" {
					target = phases.TargetNodes
				}
				if a.Kind == phases.ActStartStep && (a.Step == "health") {
					break
				}
				s.nodeStarts++
				require.True(s.t, s.allowed(c, schedule.KindOf(u.From, u.To), target, s.now), "%s: %s at %s outside its window or inside an exclusion", c.name, a.ID, s.now)
			}
		}
		if len(commits) > 0 {
			s.must(AdvanceCmd{Cluster: c.name, Upgrade: u.ID, Actions: commits, Now: s.now})
		}
		for _, a := range work {
			switch a.Kind {
			case phases.ActDispatch, phases.ActRunNodeStep:
				res := phases.NodeStepResult{Upgrade: u.ID, Node: a.Node, Cursor: a.Cursor, Attempt: a.Attempt, OK: true}
				if to, ok := s.failTo[c.name]; ok && to == u.To.String() && a.Pool == "workers" {
					delete(s.failTo, c.name)
					res.OK, res.Message = false, "kubelet not healthy after the upgrade"
				}
				s.must(NodeStepResultCmd{Cluster: c.name, Now: s.now, Result: res})
			case phases.ActRunStep:
				s.must(StepResultCmd{Cluster: c.name, Now: s.now, Result: phases.StepResult{Upgrade: u.ID, Step: a.Step, Attempt: a.Attempt, OK: true}})
			}
		}
		if len(commits) > 0 || len(work) > 0 || !d.NextWake.IsZero() {
			busy = true
		}
	}
	return busy
}

// TestSimulatedYear runs 2027 for a fleet on release channels and checks
// what SPEC §9 and §14 promise: every automatic start (and every step and
// node an automatic upgrade starts) lies in a window and outside every
// exclusion that covers it, unless an end of support forced it; a cluster
// catching up moves one minor per 30 days; an end of support forces the
// minor through; a failing cluster backs off exponentially and never
// loops; an admin cluster goes before its user clusters, one upgrade per
// family at a time; a cluster on no channel is touched only to leave a
// minor past its end of support, as is one whose channel stays on such a
// minor, and both say beforehand what will happen and when.
func TestSimulatedYear(t *testing.T) {
	began := time.Now()
	jan1 := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(month time.Month, day, hour int) time.Time {
		return time.Date(2027, month, day, hour, 0, 0, 0, time.UTC)
	}
	s := &yearSim{t: t, m: New(), now: jan1, clusters: map[string]*yearCluster{}, refuse: map[string]int{"flaky": 4}, refusals: map[string][]time.Time{}}
	v := phases.MustParseVersion
	channel := func(name, def, target string) {
		s.must(PutChannelCmd{Channel: name, DefaultVersion: v(def), AutoUpgradeTarget: v(target), Now: s.now})
	}

	// The catalog and the fleet on January 1st.
	eos := map[string]time.Time{"1.30": at(2, 15, 0), "1.31": at(5, 1, 0), "1.32": at(8, 1, 0), "1.33": time.Date(2028, 1, 15, 0, 0, 0, 0, time.UTC),
		"1.34": time.Date(2028, 4, 1, 0, 0, 0, 0, time.UTC), "1.35": time.Date(2028, 8, 1, 0, 0, 0, 0, time.UTC)}
	release := func(ver string) {
		s.must(PutReleaseCmd{Release: yearRelease(ver, eos[v(ver).MinorString()]), Now: s.now})
	}
	for _, r := range []string{"1.30.14", "1.31.12", "1.32.9", "1.33.4"} {
		release(r)
	}
	channel("regular", "1.33.4", "1.33.4")
	channel("stable", "1.31.12", "1.31.12")
	daily := &winSpec{daily: true, hour: 2, hours: 6}
	// The seed-001 retailer: a weekly 24-hour Saturday window, a spring
	// sale and a summer freeze on minors; Black Friday and the holidays
	// are added in August, once its minor's end of support allows them.
	shop := &yearCluster{name: "shop", kind: phases.KindStandalone, channel: "regular", version: "1.32.9", workers: 3,
		win: &winSpec{weekday: time.Saturday, hour: 0, hours: 24},
		excl: []maintenance.Exclusion{
			{Name: "spring-sale", Start: at(3, 19, 0), End: at(3, 29, 0), Scope: maintenance.ScopeNoUpgrades},
			{Name: "summer", Start: at(6, 1, 0), End: at(7, 31, 0), Scope: maintenance.ScopeNoMinorUpgrades},
		}}
	for _, c := range []*yearCluster{
		shop,
		// Three minors behind after a migration freeze: catch-up.
		{name: "legacy", kind: phases.KindStandalone, channel: "regular", version: "1.30.14", workers: 1,
			win:  &winSpec{daily: true, hour: 0, hours: 12},
			excl: []maintenance.Exclusion{{Name: "migration", Start: jan1, End: at(1, 28, 0), Scope: maintenance.ScopeNoUpgrades}}},
		// On stable, whose target stays on 1.31 past 1.31's end of support
		// and on 1.32 past 1.32's.
		{name: "frozen", kind: phases.KindStandalone, channel: "stable", version: "1.31.12", workers: 1, win: &winSpec{weekday: time.Tuesday, hour: 0, hours: 24}},
		// A family: the admin cluster first, then its user clusters.
		{name: "adm", kind: phases.KindAdmin, channel: "regular", version: "1.32.9", workers: 4, win: daily},
		{name: "user1", kind: phases.KindUser, admin: "adm", channel: "regular", version: "1.32.9", workers: 4, win: daily},
		{name: "user2", kind: phases.KindUser, admin: "adm", channel: "regular", version: "1.32.9", workers: 4, win: daily},
		// Its first four preflights fail.
		{name: "flaky", kind: phases.KindStandalone, channel: "regular", version: "1.33.4", workers: 1},
		// On no channel, with a Wednesday window: left alone until 1.32's
		// end of support on Sunday, August 1st.
		{name: "manual", kind: phases.KindStandalone, channel: "none", version: "1.32.9", workers: 1, win: &winSpec{weekday: time.Wednesday, hour: 0, hours: 24}},
	} {
		s.register(c)
	}

	// What the clusters left behind by their channel say beforehand.
	said := map[string]schedule.Status{}
	status := func(name string) func() {
		return func() {
			st, err := s.m.UpgradeStatus(name, s.now, schedule.Limits{})
			require.NoError(t, err)
			said[name] = st
		}
	}

	// What changes over the year.
	events := []struct {
		at time.Time
		do func()
	}{
		{at(2, 1, 9), func() { release("1.33.6"); channel("regular", "1.33.6", "1.33.6") }},
		{at(4, 5, 9), func() { release("1.34.2"); channel("regular", "1.34.2", "1.34.2") }},
		{at(4, 20, 9), status("frozen")},
		{at(5, 3, 10), func() { channel("stable", "1.32.9", "1.32.9") }},
		{at(7, 20, 9), status("manual")},
		{at(7, 12, 9), func() { release("1.35.1"); channel("regular", "1.35.1", "1.35.1") }},
		{at(8, 2, 9), func() {
			shop.excl = append(shop.excl,
				maintenance.Exclusion{Name: "black-friday", Start: at(11, 19, 0), End: at(11, 30, 0), Scope: maintenance.ScopeNoUpgrades},
				maintenance.Exclusion{Name: "holidays", Start: at(12, 1, 0), End: at(12, 31, 0), Scope: maintenance.ScopeNoMinorOrNodeUpgrades})
			s.setPolicy(shop)
		}},
		{at(10, 4, 9), func() { release("1.35.3"); channel("regular", "1.35.3", "1.35.3") }},
		// During Black Friday: shop's control plane takes it on the first
		// Saturday after, inside the holidays (which let control-plane
		// patches through), and its nodes wait for the new year.
		{at(11, 20, 9), func() { release("1.35.4"); channel("regular", "1.35.4", "1.35.4") }},
	}
	end := time.Date(2028, 1, 3, 0, 0, 0, 0, time.UTC)
	limits := schedule.Limits{}
	passes := 0
	for s.now.Before(end) {
		for len(events) > 0 && !events[0].at.After(s.now) {
			events[0].do()
			events = events[1:]
		}
		// A commit is a change: the leader passes again at once.
		wake, changed := s.pass(limits)
		for passes++; changed; passes++ {
			wake, changed = s.pass(limits)
		}
		s.checkFamily()
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
	took := time.Since(began)
	t.Logf("MEASURED simulated year: %d scheduler passes, %d log entries, %d automatic starts, %d pauses, %d resumes, %d automatic step/node starts judged, in %s",
		passes, s.idx, len(s.starts), s.pauses, s.resumes, s.nodeStarts, took.Round(time.Millisecond))
	for _, st := range s.starts {
		t.Logf("%s %-6s %s → %s %s eos=%v", st.at.Format("2006-01-02 15:04 Mon"), st.cluster, st.from, st.to, st.kind, st.eos)
	}

	startsOf := func(name string) []yearStart {
		var out []yearStart
		for _, st := range s.starts {
			if st.cluster == name {
				out = append(out, st)
			}
		}
		return out
	}
	final := func(name string) string {
		r, err := s.m.Cluster(name)
		require.NoError(t, err)
		return r.StatusVersion.String()
	}

	// Everyone on regular ends at its final target; windows paused and
	// resumed some upgrades on the way.
	for _, name := range []string{"shop", "legacy", "adm", "user1", "user2", "flaky"} {
		require.Equal(t, "1.35.4", final(name), name)
	}
	last := startsOf("shop")[len(startsOf("shop"))-1]
	require.Equal(t, at(12, 4, 0), last.at, "the first Saturday after Black Friday, in the holidays")
	r, err := s.m.Cluster("shop")
	require.NoError(t, err)
	workers, _ := r.Upgrade.Step("pool/workers")
	require.Equal(t, time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC), workers.StartedAt, "its nodes waited for the holidays to end and the window to open")
	require.Positive(t, s.pauses, "some automatic upgrade outlasted its window")
	require.Positive(t, s.resumes)
	for _, r := range s.m.Clusters() {
		if u := r.Upgrade; u != nil {
			require.Equal(t, phases.UpgradeDone, u.State, "%s: %s", r.Spec.Name, u.ID)
			require.Empty(t, u.PauseReason)
		}
	}

	// Catch-up: legacy, three minors behind, one minor per 30 days while
	// more than one behind.
	var minors []yearStart
	for _, st := range startsOf("legacy") {
		if st.kind == maintenance.KindMinor {
			minors = append(minors, st)
		}
	}
	require.GreaterOrEqual(t, len(minors), 3)
	require.Equal(t, "1.30.14 → 1.31.12", minors[0].from.String()+" → "+minors[0].to.String())
	require.Equal(t, at(1, 28, 0), minors[0].at, "the first minor as soon as the migration freeze ends")
	require.GreaterOrEqual(t, minors[1].at.Sub(minors[0].at), maintenance.CatchUpInterval, "catch-up: one minor per 30 days")

	// End of support: frozen's 1.31 ended on May 1st (a Saturday) while
	// stable still targeted 1.31.12: it went to 1.32's newest release at
	// once, outside its Tuesday window; stable moved to 1.32.9 two days
	// later and stayed there past 1.32's end on August 1st (a Sunday),
	// which forced 1.33's newest. It said so beforehand.
	fz := startsOf("frozen")
	require.Len(t, fz, 2)
	for i, want := range []struct {
		at       time.Time
		from, to string
		target   string
	}{{at(5, 1, 0), "1.31.12", "1.32.9", "1.31.12"}, {at(8, 1, 0), "1.32.9", "1.33.6", "1.32.9"}} {
		require.True(t, fz[i].eos, i)
		require.Equal(t, want.at, fz[i].at, i)
		require.Equal(t, want.from+" → "+want.to, fz[i].from.String()+" → "+fz[i].to.String(), i)
		require.Contains(t, fz[i].reason, "end of support", i)
		require.Contains(t, fz[i].reason, "channel stable targets "+want.target, i)
	}
	require.Equal(t, "1.33.6", final("frozen"))
	require.Equal(t, schedule.StateUpToDate, said["frozen"].State)
	require.Equal(t, "1.32.9", said["frozen"].Next.String())
	require.Equal(t, at(5, 1, 0), said["frozen"].NextOpportunity)
	require.Equal(t, at(5, 1, 0), said["frozen"].EndOfSupport)

	// On no channel: nothing until 1.32's end of support, then the next
	// minor's newest release at once, outside its Wednesday window; said
	// beforehand.
	mn := startsOf("manual")
	require.Len(t, mn, 1)
	require.True(t, mn[0].eos)
	require.Equal(t, at(8, 1, 0), mn[0].at)
	require.Equal(t, "1.32.9 → 1.33.6", mn[0].from.String()+" → "+mn[0].to.String())
	require.Contains(t, mn[0].reason, "not on a release channel")
	require.Equal(t, "1.33.6", final("manual"))
	require.Equal(t, schedule.StateManualOnly, said["manual"].State)
	require.Equal(t, "1.33.6", said["manual"].Next.String())
	require.Equal(t, at(8, 1, 0), said["manual"].NextOpportunity)
	require.Contains(t, said["manual"].Message, "then it is upgraded automatically to 1.33.6")

	// Backoff: flaky's four refused attempts, each retry at least the
	// doubled backoff after the last refusal, then success; no loop.
	fl := startsOf("flaky")
	require.Len(t, s.refusals["flaky"], 4)
	for i, refused := range s.refusals["flaky"] {
		require.GreaterOrEqual(t, fl[i+1].at.Sub(refused), schedule.Backoff(i+1), "attempt %d", i+2)
	}
	require.Len(t, fl, 4+5, "four refused, then 1.33.6, 1.34.2, 1.35.1, 1.35.3 and 1.35.4")

	// The admin cluster leads each minor.
	for _, u := range []string{"user1", "user2"} {
		for _, st := range startsOf(u) {
			if st.kind != maintenance.KindMinor {
				continue
			}
			var adminAt time.Time
			for _, a := range startsOf("adm") {
				if a.to.Minor == st.to.Minor {
					adminAt = a.at
					break
				}
			}
			require.False(t, adminAt.IsZero(), "%s went to %s before its admin", u, st.to)
			require.True(t, adminAt.Before(st.at))
		}
	}
}

// checkFamily: never two upgrades in progress in adm's family.
func (s *yearSim) checkFamily() {
	n := 0
	var running []string
	for _, r := range s.m.Clusters() {
		if familyName(&r.Spec) == "adm" && r.PendingUpgrade() != nil {
			n++
			running = append(running, r.Spec.Name)
		}
	}
	slices.Sort(running)
	require.LessOrEqual(s.t, n, 1, "family adm upgrades %v at once at %s", running, s.now)
}
