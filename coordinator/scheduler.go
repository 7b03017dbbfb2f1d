package coordinator

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
)

// The scheduler of automatic upgrades (SPEC §14). The decision is the pure
// package maintenance/schedule's; the leader runs it from its loop (tick)
// on every change of what it decides on — the catalog and its channels, a
// policy, a cluster, an upgrade's state, an auto-upgrade record — when a
// decision falls due by itself (a window opens, an exclusion, a
// registration hold or a backoff ends, the catch-up pace or an end of
// support is reached), and at least every Config.SchedulerInterval. Each decision is committed as a command
// the state machine checks again on the state it lands on
// (statemachine/auto.go): a start (CmdAutoStart, with the preflight run it
// begins, as a manual start does) or the record of how the last attempt
// ended (CmdAutoRecord). A new leader therefore never repeats a start its
// predecessor committed, and a decision made on a state that moved on is
// refused, not applied.
//
// Pausing at a window's end and resuming in the next window is not the
// scheduler's: an automatic upgrade's steps run behind schedule.Gate, which
// phases.Decide consults before it starts any step or node; the scheduler
// only wakes the leader when the window opens (Decision.Wake).

// schedState is the leader's memory between passes: what the last pass
// decided on and when the next one is due regardless. Only the leader
// loop touches it; a new term starts with a pass.
type schedState struct {
	passed bool
	key    uint64
	last   time.Time
	wake   time.Time
}

// due is when the next pass is due without any change.
func (s *schedState) due(interval time.Duration) time.Time {
	next := s.last.Add(interval)
	if !s.wake.IsZero() && s.wake.Before(next) {
		next = s.wake
	}
	return next
}

// scheduleAuto runs a scheduler pass when one is due and commits its
// decisions. It reports whether any was applied (the loop decides again at
// once) and when the next pass is due without a change.
func (l *leader) scheduleAuto(ctx context.Context, now time.Time) (applied bool, next time.Time) {
	st := &l.sched
	fleet := l.sm.SchedulerFleet(l.cfg.AutoUpgradeLimits)
	key := fleetKey(fleet)
	if st.passed && key == st.key && now.Before(st.due(l.cfg.SchedulerInterval)) {
		return false, st.due(l.cfg.SchedulerInterval)
	}
	p := schedule.Evaluate(fleet, now)
	st.passed, st.key, st.last, st.wake = true, key, now, p.Wake
	seq := make(map[string]int, len(fleet.Clusters))
	for _, cl := range fleet.Clusters {
		seq[cl.Name] = cl.Seq
	}
	for _, d := range p.Decisions {
		switch d.Action {
		case schedule.ActRecord:
			applied = l.autoRecord(ctx, now, d) || applied
		case schedule.ActStart:
			applied = l.autoStart(ctx, now, d, seq[d.Cluster]) || applied
		}
	}
	return applied, st.due(l.cfg.SchedulerInterval)
}

func (l *leader) autoRecord(ctx context.Context, now time.Time, d schedule.Decision) bool {
	_, err := l.apply(ctx, statemachine.AutoRecordCmd{Cluster: d.Cluster, Upgrade: d.Record.Upgrade, Outcome: d.Record.Outcome, Now: now})
	if err != nil {
		l.logDecision(d, err)
		return false
	}
	log := l.log.With("cluster", d.Cluster, "upgrade", d.Record.Upgrade, "outcome", d.Record.Outcome)
	if d.Record.Outcome != schedule.OutcomeDone {
		log.Warn("automatic upgrade did not finish; backing off", "detail", d.Record.Detail, "failures", d.State.Failures, "next_attempt", d.State.NextAttempt)
	} else {
		log.Info("automatic upgrade finished")
	}
	return true
}

// autoStart proposes a start decision with the preflight run it begins:
// the upgrade starts in state preflight and runs only if the run passes
// (SPEC §4), exactly as a manual start does.
func (l *leader) autoStart(ctx context.Context, now time.Time, d schedule.Decision, seq int) bool {
	run, err := l.newPreflightRun(d.Cluster, d.To)
	if err != nil {
		l.logDecision(d, err)
		return false
	}
	cmd := statemachine.AutoStartCmd{Cluster: d.Cluster, To: d.To, Kind: d.Kind, EndOfSupport: d.EndOfSupport, Reason: d.Reason,
		Seq: seq, Limits: l.cfg.AutoUpgradeLimits, Options: l.withAgents(l.upgradeOptions(api.UpgradeRequest{Automatic: true}), d.Cluster, d.To), Preflight: &run, Now: now}
	v, err := l.apply(ctx, cmd)
	if err != nil {
		l.logDecision(d, err)
		return false
	}
	if fn := l.autoStarted.Load(); fn != nil {
		(*fn)(cmd)
	}
	l.log.Info("automatic upgrade started", "cluster", d.Cluster, "upgrade", v, "to", d.To.String(), "kind", string(d.Kind),
		"end_of_support", d.EndOfSupport, "reason", d.Reason)
	return true
}

func (l *leader) logDecision(d schedule.Decision, err error) {
	if isStale(err) {
		l.log.Debug("scheduler decision refused as stale", "cluster", d.Cluster, "action", string(d.Action), "err", err)
		return
	}
	l.log.Warn("commit scheduler decision", "cluster", d.Cluster, "action", string(d.Action), "err", err)
}

// fleetKey digests everything a pass decides on, so that a leader tick
// (which runs on every commit) passes again only when something the
// scheduler reads changed.
func fleetKey(f *schedule.Fleet) uint64 {
	h := fnv.New64a()
	var buf [8]byte
	num := func(n int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(n))
		_, _ = h.Write(buf[:])
	}
	str := func(s string) {
		num(int64(len(s)))
		_, _ = h.Write([]byte(s))
	}
	ver := func(v phases.Version) { num(int64(v.Major)<<40 | int64(v.Minor)<<20 | int64(v.Patch)) }
	at := func(t time.Time) { num(t.UnixNano()) }
	for _, v := range f.Catalog.Versions {
		ver(v)
	}
	for _, name := range schedule.Channels {
		ch := f.Catalog.Channels[name]
		str(name)
		ver(ch.Default)
		ver(ch.Target)
	}
	for minor, eos := range f.Catalog.EndOfSupport {
		// Map order varies: combine order-free.
		num(int64(minor) ^ eos.UnixNano())
	}
	for _, sq := range f.Sequences {
		// A stored sequence, a resume or skip, a failure: pass again.
		str(sq.Name)
		for _, st := range sq.Stages {
			str(st.Name)
			num(int64(st.Soak))
			num(int64(len(st.Clusters) + len(st.Selector)))
		}
		num(int64(len(sq.Overrides)))
		num(int64(len(sq.Failures)))
	}
	for i := range f.Clusters {
		cl := &f.Clusters[i]
		str(cl.Name)
		str(string(cl.Kind))
		str(cl.Admin)
		str(cl.Channel)
		ver(cl.Current)
		str(fmt.Sprintf("%p", cl.Policy)) // compiled once per stored policy
		num(int64(cl.Seq))
		if u := cl.Upgrade; u != nil {
			str(u.ID)
			str(string(u.State))
			str(u.PauseReason)
		}
		// A node that drifts or agrees again moves a drift block: the
		// block ends with the beat that agrees, not a scheduler interval
		// later.
		for _, node := range slices.Sorted(maps.Keys(cl.Drift)) {
			str(node)
			str(cl.Drift[node])
		}
		a := cl.Auto
		num(int64(a.Failures))
		at(a.NextAttempt)
		at(a.LastMinorAt)
		at(a.HeldUntil)
		if a.Last != nil {
			str(a.Last.Upgrade)
			str(a.Last.Outcome)
		}
	}
	return h.Sum64()
}
