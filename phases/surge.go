package phases

import "slices"

// layoutMIG fills the track of a MIG pool for its strategy (SPEC §7) and
// returns the pool's nodes in the order they are upgraded: zone by zone,
// in the order of the pool's groups, and as listed inside a zone.
func layoutMIG(t *PoolTrack, p *Pool, _ any) []Node {
	t.Backing, t.Strategy = BackingMIG, p.Strategy()
	t.Groups = slices.Clone(p.Groups)
	nodes := make([]Node, 0, len(p.Nodes))
	for _, g := range p.Groups {
		for _, n := range p.Nodes {
			if n.Zone == g.Zone {
				nodes = append(nodes, n)
			}
		}
	}
	switch t.Strategy {
	case StrategyBlueGreen:
		t.NodeSteps = BlueNodeSteps()
		t.Concurrency = len(nodes)
		t.BlueGreen = newBlueGreenTrack(p.Settings.BlueGreen, len(nodes))
	default:
		t.NodeSteps = SurgePathSteps(p.Spot)
		t.UnavailableSteps = UnavailablePathSteps()
		t.RollbackSteps = UndoReplacementSteps()
		t.MaxSurge, t.MaxUnavailable = p.Settings.SurgeBudget()
		t.Concurrency = t.MaxSurge + t.MaxUnavailable
	}
	return nodes
}

// SurgePathSteps is a node's share of a surge upgrade when the zone's
// maxSurge budget takes it: create the replacement, wait until it is Ready
// at the target version, cordon, drain (best effort, grace capped at an
// hour) and delete the old node. A spot pool does not wait for the
// replacement before draining: it waits at the end.
func SurgePathSteps(spot bool) []NodeStep {
	if spot {
		return []NodeStep{{Kind: NodeCreateReplacement}, {Kind: NodeCordon}, {Kind: NodeDrain}, {Kind: NodeDeleteInstance}, {Kind: NodeWaitReplacement}}
	}
	return []NodeStep{{Kind: NodeCreateReplacement}, {Kind: NodeWaitReplacement}, {Kind: NodeCordon}, {Kind: NodeDrain}, {Kind: NodeDeleteInstance}}
}

// UnavailablePathSteps is a node's share of a surge upgrade when the
// zone's maxUnavailable budget takes it: cordon, drain, recreate the
// instance under its name from the new template, wait until it is Ready
// at the target version, uncordon.
func UnavailablePathSteps() []NodeStep {
	return []NodeStep{{Kind: NodeCordon}, {Kind: NodeDrain}, {Kind: NodeRecreateInstance}, {Kind: NodeWaitReady}, {Kind: NodeUncordon}}
}

// UndoReplacementSteps rolls back a surge node whose replacement was made
// but which was not replaced yet: the replacement is deleted and the node,
// which still runs the old version, uncordoned.
func UndoReplacementSteps() []NodeStep {
	return []NodeStep{{Kind: NodeUndoReplacement}}
}

// BlueNodeSteps is what a blue/green upgrade does to each blue node: it is
// cordoned with the whole pool (CORDONING_BLUE_POOL), then drained with
// its batch (DRAINING_BLUE_POOL); the blue groups are deleted as a whole
// (DELETING_BLUE_POOL).
func BlueNodeSteps() []NodeStep {
	return []NodeStep{{Kind: NodeCordon}, {Kind: NodeDrain}}
}

// surgeZone is the zone a surge pool works in: the first zone, in the
// pool's order (reversed when rolling back), that has a node still to go
// in the pool's direction. Zones are upgraded one after another (SPEC
// §7). "" when every zone is finished.
func surgeZone(u *Upgrade, p *PoolTrack) string {
	nodes := u.PoolNodes(p)
	for i := range p.Groups {
		g := p.Groups[i]
		if p.RollingBack {
			// Back in reverse: the zone upgraded last goes back first.
			g = p.Groups[len(p.Groups)-1-i]
		}
		for j := range nodes {
			if nodes[j].Zone == g.Zone && !p.finished(u, &nodes[j]) {
				return g.Zone
			}
		}
	}
	return ""
}

// finished reports whether a node needs nothing more in the pool's
// current direction.
func (p *PoolTrack) finished(u *Upgrade, n *NodeTask) bool {
	if p.RollingBack {
		return n.State == StatePending || n.State == StateDone && n.Rollback
	}
	return n.State == StateDone
}

// surgeRoom is how many more nodes of the pool's current zone may start
// on the surge path and on the unavailable path. Running and failed nodes
// hold their budget: a failed surge node's replacement still exists, a
// failed unavailable node is still down; a rollback's undo holds the
// surge budget until the replacement it deletes is gone.
func surgeRoom(u *Upgrade, p *PoolTrack) (zone string, surge, unavailable int) {
	zone = surgeZone(u, p)
	if zone == "" {
		return "", 0, 0
	}
	surge, unavailable = p.MaxSurge, p.MaxUnavailable
	for _, n := range u.PoolNodes(p) {
		if n.Zone != zone || (n.State != StateRunning && n.State != StateFailed) {
			continue
		}
		switch n.Path {
		case PathMain, PathRollback:
			// An undo holds the replacement it is deleting.
			surge--
		case PathUnavailable:
			unavailable--
		}
	}
	return zone, max(surge, 0), max(unavailable, 0)
}
