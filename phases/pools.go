package phases

import (
	"slices"
	"sort"
	"time"
)

// decideNodes is Decide for a running pool step whose nodes each go
// through a node step list: bare-metal pools in place, surge pools by
// replacing instances. It issues the next step of every running node,
// starts new nodes within the pool's budget, and ends the step: complete
// when every node is done, halted when a cancel or a rollback finished.
func decideNodes(u *Upgrade, s *Step, p *PoolTrack, now time.Time, gate Gate, d *Decision) {
	nodes := u.PoolNodes(p)
	done, failed, running := 0, 0, 0
	held := false
	for i := range nodes {
		n := &nodes[i]
		switch n.State {
		case StateRunning:
			running++
			held = held || n.RedGate != ""
			if n.RetryAt.After(now) {
				d.wake(n.RetryAt)
				continue
			}
			d.Actions = append(d.Actions, actNodeStep(u, n, p.steps(n.Path)[n.Cursor]))
		case StateDone:
			done++
		case StateFailed:
			failed++
		}
	}
	if p.RollingBack {
		decideRollback(u, s, p, running, d)
		return
	}
	if done == len(nodes) {
		d.Actions = append(d.Actions, actCompleteStep(u, s))
		return
	}
	if p.Cancelled {
		if running == 0 {
			d.Actions = append(d.Actions, actHaltStep(u, s, StateCancelled))
		}
		return
	}
	switch {
	case p.FailReason != "":
		// Past its budget, not rolling back: started nodes finish, then
		// the step fails.
		if running == 0 {
			d.Actions = append(d.Actions, actHaltStep(u, s, StateFailed))
		}
		return
	case p.MaxFailedNodes > 0 && failed >= p.MaxFailedNodes:
		d.Actions = append(d.Actions, Action{ID: u.ID + "/fail/" + p.Name, Kind: ActFailPool, Upgrade: u.ID, Pool: p.Name})
		return
	case p.MaxFailedNodes == 0 && failed > 0:
		// Upgrades laid out before failure budgets: a failed node halts
		// the pool until an operator retries it (or rolls it back):
		// starting more nodes after an unexplained failure risks
		// repeating it fleet-wide.
		return
	case u.failing():
		// Another pool failed: nothing new starts anywhere; this pool
		// halts once its started nodes finished.
		if running == 0 {
			d.Actions = append(d.Actions, actHaltStep(u, s, StateCancelled))
		}
		return
	case held:
		return // a red health gate holds the pool
	}
	t, _ := s.Target()
	if ok, reason := gate.Allow(t); !ok {
		if done+running < len(nodes) {
			d.block(reason)
		}
		return
	}
	if p.Strategy == StrategySurge {
		startSurge(u, p, d)
		return
	}
	startInPlace(u, p, now, d)
}

// startInPlace starts pending nodes of a bare-metal pool within its
// budget, nodes holding pods protected from eviction last (SPEC §8).
func startInPlace(u *Upgrade, p *PoolTrack, now time.Time, d *Decision) {
	nodes := u.PoolNodes(p)
	room := max(budget(u, p), 0)
	var protected []*NodeTask
	for i := range nodes {
		n := &nodes[i]
		if n.State != StatePending {
			continue
		}
		if n.ProtectedUntil.After(now) {
			protected = append(protected, n)
			continue
		}
		if room > 0 {
			d.Actions = append(d.Actions, actStartNode(u, n, PathMain))
			room--
		}
	}
	if len(protected) == 0 {
		return
	}
	// Nodes holding pods protected from eviction go last (SPEC §8), the
	// soonest-free first. Automatic upgrades wait until they are free.
	sort.SliceStable(protected, func(i, j int) bool { return protected[i].ProtectedUntil.Before(protected[j].ProtectedUntil) })
	for _, n := range protected {
		if !u.Options.Automatic {
			if room == 0 {
				break
			}
			d.Actions = append(d.Actions, actStartNode(u, n, PathMain))
			room--
			continue
		}
		d.Waiting = append(d.Waiting, NodeWait{Node: n.Node, Until: n.ProtectedUntil, Reason: "protected-pods"})
		d.wake(n.ProtectedUntil)
	}
}

// startSurge starts pending nodes of a surge pool's current zone: on the
// surge path while maxSurge allows, then on the unavailable path while
// maxUnavailable allows (SPEC §7).
func startSurge(u *Upgrade, p *PoolTrack, d *Decision) {
	zone, surge, unavailable := surgeRoom(u, p)
	nodes := u.PoolNodes(p)
	for i := range nodes {
		n := &nodes[i]
		if n.Zone != zone || n.State != StatePending {
			continue
		}
		switch {
		case surge > 0:
			d.Actions = append(d.Actions, actStartNode(u, n, PathMain))
			surge--
		case unavailable > 0:
			d.Actions = append(d.Actions, actStartNode(u, n, PathUnavailable))
			unavailable--
		default:
			return
		}
	}
}

// decideRollback takes a surge pool back: every node this upgrade touched
// returns to the From version, zone by zone, within the same budget; the
// step is halted as rolled back once none is left. A node that failed on
// its way forward already holds its path's budget and goes back on a
// path of the same kind; a node that failed on its way back waits for a
// retry.
func decideRollback(u *Upgrade, s *Step, p *PoolTrack, running int, d *Decision) {
	nodes := u.PoolNodes(p)
	for i := range nodes {
		if nodes[i].Rollback && nodes[i].State == StateFailed {
			return
		}
	}
	if p.Strategy != StrategySurge {
		rollbackInPlace(u, s, p, running, d)
		return
	}
	zone, surge, unavailable := surgeRoom(u, p)
	if zone == "" {
		if running == 0 {
			d.Actions = append(d.Actions, actHaltStep(u, s, StateRolledBack))
		}
		return
	}
	for i := range nodes {
		n := &nodes[i]
		if n.Zone != zone || !u.needsRollback(p, n) {
			continue
		}
		path := rollbackPath(p, n)
		if n.State == StateFailed {
			d.Actions = append(d.Actions, actStartRollback(u, n, path))
			continue
		}
		switch {
		case path == PathUnavailable && unavailable > 0:
			d.Actions = append(d.Actions, actStartRollback(u, n, path))
			unavailable--
		case path != PathUnavailable && surge > 0:
			d.Actions = append(d.Actions, actStartRollback(u, n, path))
			surge--
		case path == PathMain && unavailable > 0:
			// No surge room: a replaced node may go back in place.
			d.Actions = append(d.Actions, actStartRollback(u, n, PathUnavailable))
			unavailable--
		}
	}
}

// rollbackInPlace takes an in-place pool's nodes back in rollbackOrder
// (the reverse of the order they started in), within the pool's budget: at
// most Concurrency nodes at once, never fewer than MinAvailable
// schedulable. A node that failed on its way forward is already down and
// takes a place in Concurrency only. Nodes still going forward finish
// first; the next node waits for room, and none after it goes first.
func rollbackInPlace(u *Upgrade, s *Step, p *PoolTrack, running int, d *Decision) {
	nodes := u.PoolNodes(p)
	for i := range nodes {
		if nodes[i].State == StateRunning && !nodes[i].Rollback {
			return // nodes still going forward finish first: then the order is known
		}
	}
	room, undone := max(budget(u, p), 0), max(p.Concurrency-running, 0)
	left := false
	for _, i := range rollbackOrder(nodes) {
		n := &nodes[i]
		if !u.needsRollback(p, n) {
			continue
		}
		left = true
		if undone <= 0 || n.State == StateDone && room <= 0 {
			break
		}
		d.Actions = append(d.Actions, actStartRollback(u, n, PathRollback))
		undone--
		room--
	}
	if !left && running == 0 {
		d.Actions = append(d.Actions, actHaltStep(u, s, StateRolledBack))
	}
}

// nextInRollback reports whether n is the first node of the pool's
// rollbackOrder still to go back.
func (u *Upgrade) nextInRollback(p *PoolTrack, n *NodeTask) bool {
	nodes := u.PoolNodes(p)
	for _, i := range rollbackOrder(nodes) {
		if u.needsRollback(p, &nodes[i]) {
			return nodes[i].Node == n.Node
		}
	}
	return false
}

// rollbackLeft reports whether a rolling-back pool has nodes to take back
// or in flight.
func (u *Upgrade) rollbackLeft(p *PoolTrack) bool {
	for _, n := range u.PoolNodes(p) {
		if n.State == StateRunning || u.needsRollback(p, &n) || n.Rollback && n.State == StateFailed {
			return true
		}
	}
	return false
}

// needsRollback reports whether a node of a rolling-back pool still has
// to start going back: it went forward (done, or failed on its way) and
// has not been taken back yet.
func (u *Upgrade) needsRollback(p *PoolTrack, n *NodeTask) bool {
	return p.RollingBack && !n.Rollback && (n.State == StateDone || n.State == StateFailed)
}

// rollbackPath is how a node goes back: a surge node that was not
// replaced yet only loses its replacement (PathRollback); one that was
// replaced, or recreated in place, is replaced again at the old version
// (the surge path when the budget allows, PathMain, or in place).
func rollbackPath(p *PoolTrack, n *NodeTask) int {
	if n.Path == PathMain && n.Current == "" {
		return PathRollback
	}
	if n.Path == PathUnavailable {
		return PathUnavailable
	}
	return PathMain
}

// steps is the node step list of a path.
func (p *PoolTrack) steps(path int) []NodeStep {
	switch path {
	case PathUnavailable:
		return p.UnavailableSteps
	case PathRollback:
		return p.RollbackSteps
	}
	return p.NodeSteps
}

// StepsOf is the node step list the node follows.
func (p *PoolTrack) StepsOf(n *NodeTask) []NodeStep { return p.steps(n.Path) }

// stuck reports whether a running upgrade can go no further by itself:
// no step runs, no pending step could start, and a pool step was
// cancelled or rolled back.
func (u *Upgrade) stuck() bool {
	halted := false
	failing := u.failing()
	for i := range u.Steps {
		s := &u.Steps[i]
		switch s.State {
		case StateRunning:
			return false
		case StatePending:
			if depsDone(u, s) && !failing {
				return false
			}
		case StateCancelled, StateRolledBack, StateFailed:
			halted = true
		}
	}
	return halted
}

// TargetOf is the version a node is going to: the upgrade's To, or its
// From while the node is rolled back.
func (u *Upgrade) TargetOf(n *NodeTask) Version {
	if n.Rollback {
		return u.From
	}
	return u.To
}

// ReplacementPurpose is what names a node's replacement: the upgrade, or
// its rollback.
func (u *Upgrade) ReplacementPurpose(rollback bool) string {
	if rollback {
		return u.ID + "/rollback"
	}
	return u.ID
}

// groupOf is the instance group of a node's zone in a MIG pool.
func (p *PoolTrack) groupOf(zone string) string {
	i := slices.IndexFunc(p.Groups, func(g InstanceGroup) bool { return g.Zone == zone })
	if i < 0 {
		return ""
	}
	return p.Groups[i].Name
}

// GroupOf is the instance group of the node's zone (MIG pools).
func (p *PoolTrack) GroupOf(n *NodeTask) string { return p.groupOf(n.Zone) }
