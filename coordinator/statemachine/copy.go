package statemachine

import (
	"maps"
	"slices"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
)

// Copies. What a query returns and what Precheck runs an apply function on
// are made by the helpers below, and each shares no memory with what it
// copied: no pointer, map or slice backing array (strings aside, which
// nothing writes). Apply functions change records in place (a transition
// assigns a node's fields and appends to its lists), so a copy that shared
// any of that would see the state change under it, or change the state,
// or, when two prechecks ran the same transition under the read lock,
// race with another copy.
//
// They are written out rather than made by reflection: the leader copies
// every running upgrade on each tick, and a reflective deep copy of an
// upgrade of 15,000 nodes took about five times as long and 90,000
// allocations to these helpers' 138 (BenchmarkCopyUpgrade15k). What
// keeps them complete is TestCopiesShareNoMemory
// (copy_test.go): it fills every exported field of every type they copy,
// recursively, so a field added to any record later is filled too, and
// fails when a copy differs from its original, shares memory with it, or
// when a function named copy… has no case there. The one thing shared on
// purpose is an upgrade's lookup indexes (unexported, read-only once
// built; the test lists them).

// copyCluster copies a record but its preflight runs (Preflights is nil;
// ask Preflight for one).
func copyCluster(r *ClusterRecord) ClusterRecord {
	out := *r
	out.Spec = copySpec(r.Spec)
	out.Upgrade = copyUpgrade(r.Upgrade)
	out.History = slices.Clone(r.History)
	if r.Agents != nil {
		out.Agents = make(map[string]*AgentRecord, len(r.Agents))
		for n, a := range r.Agents {
			cp := copyAgent(a)
			out.Agents[n] = &cp
		}
	}
	out.Policy = copyPolicy(r.Policy)
	out.Preflights = nil
	if r.AgentCerts != nil {
		out.AgentCerts = make(map[string][]string, len(r.AgentCerts))
		for n, serials := range r.AgentCerts {
			out.AgentCerts[n] = slices.Clone(serials)
		}
	}
	out.Auto = copyAuto(r.Auto)
	out.Backups = slices.Clone(r.Backups)
	return out
}

// copySpec copies a cluster's spec.
func copySpec(s phases.ClusterSpec) phases.ClusterSpec {
	if s.Pools != nil {
		pools := make([]phases.Pool, len(s.Pools))
		for i := range s.Pools {
			pools[i] = copyPool(s.Pools[i])
		}
		s.Pools = pools
	}
	s.Cloud = clonePtr(s.Cloud)
	s.HealthGates = slices.Clone(s.HealthGates)
	s.Labels = maps.Clone(s.Labels)
	return s
}

// copyPool copies a pool of a cluster's spec with its settings.
func copyPool(p phases.Pool) phases.Pool {
	st := &p.Settings
	st.MaxSurge = clonePtr(st.MaxSurge)
	st.MaxUnavailable = clonePtr(st.MaxUnavailable)
	if st.BlueGreen != nil {
		bg := *st.BlueGreen
		bg.BatchNodeCount = clonePtr(bg.BatchNodeCount)
		bg.BatchPercentage = clonePtr(bg.BatchPercentage)
		bg.NodePoolSoak = clonePtr(bg.NodePoolSoak)
		st.BlueGreen = &bg
	}
	st.MaxFailedNodes = clonePtr(st.MaxFailedNodes)
	st.HealthGates = slices.Clone(st.HealthGates)
	p.Nodes = slices.Clone(p.Nodes)
	p.Groups = slices.Clone(p.Groups)
	p.Autoscaling = clonePtr(p.Autoscaling)
	return p
}

// copyUpgrade copies an upgrade. Its lookup indexes are shared: BuildIndex
// makes new maps and nothing changes them in place, and the copy keeps
// the order of Nodes, Steps and Pools they point into.
func copyUpgrade(u *phases.Upgrade) *phases.Upgrade {
	if u == nil {
		return nil
	}
	cp := *u
	cp.RefusedChecks = slices.Clone(u.RefusedChecks)
	cp.Steps = slices.Clone(u.Steps)
	for i := range cp.Steps {
		cp.Steps[i].Deps = slices.Clone(u.Steps[i].Deps)
	}
	if u.Pools != nil {
		cp.Pools = make([]phases.PoolTrack, len(u.Pools))
		for i := range u.Pools {
			cp.Pools[i] = copyPoolTrack(u.Pools[i])
		}
	}
	cp.Nodes = copyNodeTasks(u.Nodes)
	cp.Agents = slices.Clone(u.Agents)
	cp.Options.AgentVersions = maps.Clone(u.Options.AgentVersions)
	return &cp
}

// copyPoolTrack copies a pool's part of an upgrade.
func copyPoolTrack(p phases.PoolTrack) phases.PoolTrack {
	p.NodeSteps = copyNodeSteps(p.NodeSteps)
	p.UnavailableSteps = copyNodeSteps(p.UnavailableSteps)
	p.RollbackSteps = copyNodeSteps(p.RollbackSteps)
	p.Groups = slices.Clone(p.Groups)
	if p.BlueGreen != nil {
		bg := *p.BlueGreen
		if bg.Green != nil {
			bg.Green = make([]phases.GreenGroup, len(p.BlueGreen.Green))
			for i, g := range p.BlueGreen.Green {
				g.Nodes = slices.Clone(g.Nodes)
				bg.Green[i] = g
			}
		}
		p.BlueGreen = &bg
	}
	p.Gates = slices.Clone(p.Gates)
	return p
}

// copyNodeSteps copies a pool's node step list with each step's operation.
func copyNodeSteps(steps []phases.NodeStep) []phases.NodeStep {
	out := slices.Clone(steps)
	for i := range out {
		out[i].Op = clonePtr(out[i].Op)
	}
	return out
}

// copyNodeTasks copies an upgrade's node tasks. The nodes' lists are cut
// from one array per kind of list (three allocations for 15,000 nodes,
// not 45,000), each capped at its length so that an append to one node's
// list moves it rather than writing over the next node's.
func copyNodeTasks(nodes []phases.NodeTask) []phases.NodeTask {
	if nodes == nil {
		return nil
	}
	out := slices.Clone(nodes)
	var left, applied, drained int
	for i := range nodes {
		left += len(nodes[i].LeftBehind)
		applied += len(nodes[i].Applied)
		drained += len(nodes[i].Drained)
	}
	leftBuf := make([]phases.LeftPod, 0, left)
	appliedBuf := make([]phases.AppliedOp, 0, applied)
	drainedBuf := make([]phases.Workload, 0, drained)
	for i := range out {
		out[i].LeftBehind, leftBuf = cut(leftBuf, nodes[i].LeftBehind)
		out[i].Applied, appliedBuf = cut(appliedBuf, nodes[i].Applied)
		out[i].Drained, drainedBuf = cut(drainedBuf, nodes[i].Drained)
	}
	return out
}

// copyNodeTask copies one node's task.
func copyNodeTask(n *phases.NodeTask) phases.NodeTask {
	return copyNodeTasks([]phases.NodeTask{*n})[0]
}

// cut appends s to buf, which has room for it, and returns the appended
// part, capped at its length (nil for nil s), and the grown buf.
func cut[E any](buf, s []E) ([]E, []E) {
	if s == nil {
		return nil, buf
	}
	n := len(buf)
	buf = append(buf, s...)
	return buf[n:len(buf):len(buf)], buf
}

// copyAgent copies an agent's record.
func copyAgent(a *AgentRecord) AgentRecord {
	out := *a
	out.StaticPods = maps.Clone(a.StaticPods)
	return out
}

// copyPolicy copies a maintenance policy.
func copyPolicy(p *maintenance.Policy) *maintenance.Policy {
	if p == nil {
		return nil
	}
	cp := *p
	cp.Window = clonePtr(p.Window)
	cp.Exclusions = slices.Clone(p.Exclusions)
	return &cp
}

// copyAuto copies a cluster's auto-upgrade record.
func copyAuto(a schedule.State) schedule.State {
	a.Last = clonePtr(a.Last)
	return a
}

// copyPreflight copies a preflight run.
func copyPreflight(p *PreflightRun) PreflightRun {
	out := *p
	if p.Operations != nil {
		out.Operations = make(map[string][]api.Operation, len(p.Operations))
		for node, ops := range p.Operations {
			if ops != nil {
				cp := make([]api.Operation, len(ops))
				for i := range ops {
					cp[i] = copyOperation(ops[i])
				}
				ops = cp
			}
			out.Operations[node] = ops
		}
	}
	if p.Results != nil {
		out.Results = make(map[string]api.OperationResult, len(p.Results))
		for id, r := range p.Results {
			out.Results[id] = copyOperationResult(r)
		}
	}
	out.Report = copyReport(p.Report)
	return out
}

// copyOperation copies an agent operation with its kind's parameters.
func copyOperation(o api.Operation) api.Operation {
	o.UpgradeBinary = clonePtr(o.UpgradeBinary)
	o.UpdateAgent = clonePtr(o.UpdateAgent)
	o.EtcdSnapshot = clonePtr(o.EtcdSnapshot)
	if o.UpgradeStaticPods != nil {
		sp := *o.UpgradeStaticPods
		sp.Manifests = maps.Clone(sp.Manifests)
		sp.Images = maps.Clone(sp.Images)
		o.UpgradeStaticPods = &sp
	}
	if o.ImportImages != nil {
		ii := *o.ImportImages
		ii.Archives = slices.Clone(ii.Archives)
		o.ImportImages = &ii
	}
	if o.PullImages != nil {
		pi := *o.PullImages
		pi.Refs = slices.Clone(pi.Refs)
		o.PullImages = &pi
	}
	o.Rollback = clonePtr(o.Rollback)
	if o.CheckArtifacts != nil {
		ca := *o.CheckArtifacts
		ca.Artifacts = slices.Clone(ca.Artifacts)
		o.CheckArtifacts = &ca
	}
	if o.ProbePeers != nil {
		pp := *o.ProbePeers
		pp.Addresses = slices.Clone(pp.Addresses)
		o.ProbePeers = &pp
	}
	return o
}

// copyOperationResult copies an agent's result of an operation.
func copyOperationResult(r api.OperationResult) api.OperationResult {
	r.Details = maps.Clone(r.Details)
	return r
}

// copyReport copies a preflight report.
func copyReport(r *preflight.Report) *preflight.Report {
	if r == nil {
		return nil
	}
	cp := *r
	if r.Results != nil {
		cp.Results = make([]preflight.Result, len(r.Results))
		for i, res := range r.Results {
			res.Data = maps.Clone(res.Data)
			cp.Results[i] = res
		}
	}
	cp.Failed = slices.Clone(r.Failed)
	return &cp
}

// copyRelease copies a catalog entry.
func copyRelease(r *api.Release) api.Release {
	out := *r
	out.Channels = slices.Clone(r.Channels)
	out.Components.StaticPods = maps.Clone(r.Components.StaticPods)
	out.Components.Images = slices.Clone(r.Components.Images)
	out.Components.Addons = slices.Clone(r.Components.Addons)
	out.Agent = clonePtr(r.Agent)
	return out
}

// clonePtr copies the value p points to, which holds no reference.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
