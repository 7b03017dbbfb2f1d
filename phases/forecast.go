package phases

import (
	"slices"
	"time"
)

// ObservedDurations is def with each role's node time replaced by the mean
// of the nodes of that role this upgrade has finished (cordon → uncordon),
// and each finished cluster-level step's time by what it took. Roles and
// steps nothing has finished yet keep def's guess.
func ObservedDurations(u *Upgrade, def Durations) Durations {
	out := def
	out.Node = make(map[Role]time.Duration, len(def.Node))
	for r, d := range def.Node {
		out.Node[r] = d
	}
	sum := map[Role]time.Duration{}
	count := map[Role]int{}
	for _, p := range u.Pools {
		for _, n := range u.PoolNodes(&p) {
			if n.State != StateDone || n.StartedAt.IsZero() || n.FinishedAt.Before(n.StartedAt) {
				continue
			}
			sum[p.Role] += n.FinishedAt.Sub(n.StartedAt)
			count[p.Role]++
		}
	}
	for r, c := range count {
		out.Node[r] = sum[r] / time.Duration(c)
	}
	for _, s := range u.Steps {
		if s.State != StateDone || s.StartedAt.IsZero() {
			continue
		}
		took := s.FinishedAt.Sub(s.StartedAt)
		switch s.Kind {
		case StepAddons:
			out.Addons = took
		case StepLifecycle:
			out.Lifecycle = took
		case StepHealth:
			out.Health = took
		}
	}
	return out
}

// Forecast predicts when the rest of u finishes if it goes on from now with
// the node and step times in dur: the same list schedule as MakePlan — the
// step graph's dependencies, each pool's concurrency (nodes in flight keep
// their slots until they are expected to finish), worker pools sharing
// Options.ConcurrentWorkerPools slots — applied to what is left. A node or
// step already past its expected time is expected to finish now. ok is
// false when no finish can be predicted: the upgrade has a failed node
// (its pool waits for an operator) or is no longer running.
func Forecast(u *Upgrade, dur Durations, now time.Time) (end time.Time, ok bool) {
	if u.State != UpgradeRunning {
		return time.Time{}, false
	}
	for i := range u.Nodes {
		if u.Nodes[i].State == StateFailed {
			return time.Time{}, false
		}
	}
	ends := map[string]time.Time{}
	workerSlots := make([]time.Time, min(max(1, u.Options.ConcurrentWorkerPools), MaxConcurrentWorkerPools))
	for i := range workerSlots {
		workerSlots[i] = now
	}
	end = now
	// Steps are stored in dependency order (buildSteps), as MakePlan uses them.
	for _, s := range u.Steps {
		if s.State == StateDone {
			ends[s.ID] = s.FinishedAt
			continue
		}
		begin := now
		for _, d := range s.Deps {
			if ends[d].After(begin) {
				begin = ends[d]
			}
		}
		if s.State == StateRunning && s.StartedAt.After(begin) {
			begin = s.StartedAt
		}
		var stepEnd time.Time
		switch s.Kind {
		case StepPool:
			p, found := u.Pool(s.Pool)
			if !found {
				return time.Time{}, false
			}
			slot := -1
			if s.Role == RoleWorker {
				slot = earliest(workerSlots)
				if s.State != StateRunning && workerSlots[slot].After(begin) {
					begin = workerSlots[slot]
				}
			}
			if p.BlueGreen != nil {
				stepEnd = forecastBlueGreen(u, p, dur, begin, now)
			} else {
				stepEnd = forecastPool(u, p, dur.Node[s.Role], begin, now)
			}
			if slot >= 0 {
				workerSlots[slot] = stepEnd
			}
		case StepMolt:
			stepEnd = latest(begin.Add(u.moltLeft(dur.Agent)), now)
		default:
			d := map[StepKind]time.Duration{StepAddons: dur.Addons, StepLifecycle: dur.Lifecycle, StepHealth: dur.Health}[s.Kind]
			start := begin
			if s.State == StateRunning && !s.StartedAt.IsZero() {
				start = s.StartedAt
			}
			stepEnd = latest(start.Add(d), now)
		}
		ends[s.ID] = stepEnd
		if stepEnd.After(end) {
			end = stepEnd
		}
	}
	return end, true
}

// forecastPool schedules a pool's remaining nodes on its concurrency slots
// from begin and returns when the last one is expected to finish.
func forecastPool(u *Upgrade, p *PoolTrack, nodeDur time.Duration, begin, now time.Time) time.Time {
	width := max(1, min(p.Concurrency, p.Count-p.MinAvailable))
	slots := make([]time.Time, 0, width)
	// starts holds, per pending node, the earliest it may start: an
	// automatic upgrade leaves a node with pods protected from eviction
	// alone until they are free (startInPlace), so its node starts no
	// earlier than that, whatever the slots allow.
	var starts []time.Time
	end := begin
	for _, n := range u.PoolNodes(p) {
		switch n.State {
		case StateRunning:
			slots = append(slots, latest(n.StartedAt.Add(nodeDur), now))
		case StatePending:
			at := begin
			if u.Options.Automatic && n.ProtectedUntil.After(at) {
				at = n.ProtectedUntil
			}
			starts = append(starts, at)
		}
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// More nodes in flight than slots (settings changed): they all finish
	// before anything new starts.
	slices.SortFunc(slots, func(a, b time.Time) int { return a.Compare(b) })
	for len(slots) > width {
		slots = slots[1:]
	}
	for len(slots) < width {
		slots = append(slots, begin)
	}
	for _, t := range slots {
		end = latest(end, t)
	}
	for _, at := range starts {
		i := earliest(slots)
		slots[i] = latest(slots[i], at).Add(nodeDur)
		end = latest(end, slots[i])
	}
	return end
}

// forecastBlueGreen predicts when a blue/green pool ends from its phase:
// the green pool's creation, the batches left with their soaks, the pool
// soak (its end is known once it started) and the deletion of blue.
func forecastBlueGreen(u *Upgrade, p *PoolTrack, dur Durations, begin, now time.Time) time.Time {
	bg := p.BlueGreen
	at := latest(begin, now)
	left := max(bg.batches(p.Count)-bg.Batch, 0)
	batches := time.Duration(left) * (dur.Drain + min(bg.BatchSoak, max(MaxTotalSoak-bg.Soaked, 0)))
	soakLeft := min(bg.PoolSoak, max(MaxTotalSoak-bg.Soaked-time.Duration(left)*bg.BatchSoak, 0))
	switch bg.Phase {
	case "", PhaseCreatingGreen:
		return at.Add(dur.Instance + batches + soakLeft + dur.Drain)
	case PhaseCordoningBlue, PhaseDrainingBlue:
		return latest(at, bg.BatchSoakUntil).Add(batches + soakLeft + dur.Drain)
	case PhaseSoaking:
		if bg.Completed {
			return at.Add(dur.Drain)
		}
		return latest(at, bg.SoakUntil).Add(dur.Drain)
	case PhaseDeletingBlue, PhaseRollbackStarted:
		return latest(at, bg.PhaseStartedAt.Add(dur.Drain))
	}
	return at
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
