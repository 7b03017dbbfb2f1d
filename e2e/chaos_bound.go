package e2e

import (
	"fmt"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
)

// A lab upgrade's wall time against the sum of its steps' lower bounds
// (docs/performance.md, the lab row): what the coordinator adds between
// the work it orders.
//
// A step's lower bound is the work its nodes did, arranged as tightly as
// its pool's concurrency allows. A node's work is its time from start to
// finish less what it spent between an agent operation's dispatch and the
// agent starting it, and between the agent journaling its result and the
// coordinator moving the node on: for an operation step, the step's
// recorded duration minus the operation's own (from the agent's journal).
// Cordon, drain, the wait for Ready, uncordon and the gates count whole as
// work (their time is the cluster's). A pool step's bound is the larger of
// its longest node and its nodes' total over its concurrency; the add-ons
// and health steps count whole. The steps' bounds are summed along SPEC
// §4's order (the upgrade's recorded dependencies, the longest chain);
// the wall time runs from the first step's start to the last one's end.

// StepBound is one step's measured time and lower bound.
type StepBound struct {
	ID          string
	Took, Bound time.Duration
}

// BoundReport is the lab row's figure for one upgrade.
type BoundReport struct {
	Wall, Bound time.Duration
	// Overhead is the dispatch and report time removed from the nodes'
	// operation steps, summed over every node.
	Overhead time.Duration
	Steps    []StepBound
}

// Ratio is Wall over Bound (≥ 1).
func (b BoundReport) Ratio() float64 {
	if b.Bound <= 0 {
		return 0
	}
	return float64(b.Wall) / float64(b.Bound)
}

func (b BoundReport) String() string {
	var parts []string
	for _, s := range b.Steps {
		parts = append(parts, fmt.Sprintf("%s %.0fs/%.0fs", s.ID, s.Took.Seconds(), s.Bound.Seconds()))
	}
	return fmt.Sprintf("wall %.0fs vs bound %.0fs: %.2f× (steps took/bound: %s; dispatch and reporting inside operation steps %.0fs over all nodes)",
		b.Wall.Seconds(), b.Bound.Seconds(), b.Ratio(), strings.Join(parts, ", "), b.Overhead.Seconds())
}

// LowerBound computes the lab row for a finished upgrade u. starts maps a
// node to the StepStartedAt seen at each cursor while the upgrade ran;
// ops are the agents' journaled operations by ID.
func LowerBound(u *api.Upgrade, starts map[string]map[int]time.Time, ops map[string]OpTimes) (BoundReport, error) {
	var r BoundReport
	if u == nil || u.State != api.UpgradeDone {
		return r, fmt.Errorf("lower bound: only a completed upgrade has one")
	}
	work := map[string]time.Duration{}
	for i := range u.Nodes {
		n := &u.Nodes[i]
		p, ok := u.Pool(n.Pool)
		if !ok || n.StartedAt.IsZero() || n.FinishedAt.IsZero() {
			continue
		}
		steps := p.StepsOf(n)
		d := n.FinishedAt.Sub(n.StartedAt)
		seen := starts[n.Node]
		for c, s := range steps {
			if s.Kind != api.NodeStepOperation {
				continue
			}
			begin, ok := seen[c]
			if !ok {
				continue
			}
			end, ok := seen[c+1]
			if c == len(steps)-1 {
				end, ok = n.FinishedAt, true
			}
			op, found := ops[operationID(u, n.Node, c, n.Attempt)]
			if !ok || !found || op.Finished.IsZero() {
				continue
			}
			if gap := end.Sub(begin) - op.Finished.Sub(op.Started); gap > 0 {
				d -= gap
				r.Overhead += gap
			}
		}
		work[n.Node] = d
	}
	bound := map[string]time.Duration{}
	end := map[string]time.Duration{}
	var first, last time.Time
	for _, s := range u.Steps {
		if s.StartedAt.IsZero() || s.FinishedAt.IsZero() {
			return r, fmt.Errorf("lower bound: step %s has no start or end", s.ID)
		}
		if first.IsZero() || s.StartedAt.Before(first) {
			first = s.StartedAt
		}
		if s.FinishedAt.After(last) {
			last = s.FinishedAt
		}
		took := s.FinishedAt.Sub(s.StartedAt)
		b := took
		if s.Kind == api.StepKindPool {
			p, ok := u.Pool(s.Pool)
			if !ok {
				return r, fmt.Errorf("lower bound: no pool %s", s.Pool)
			}
			var sum, longest time.Duration
			for _, n := range u.PoolNodes(p) {
				sum += work[n.Node]
				longest = max(longest, work[n.Node])
			}
			width := max(p.Concurrency, 1)
			b = max(longest, sum/time.Duration(width))
		}
		bound[s.ID] = b
		// Steps are listed after their dependencies (the coordinator lays them out so).
		var after time.Duration
		for _, d := range s.Deps {
			after = max(after, end[d])
		}
		end[s.ID] = after + b
		r.Bound = max(r.Bound, end[s.ID])
		r.Steps = append(r.Steps, StepBound{ID: s.ID, Took: took, Bound: b})
	}
	r.Wall = last.Sub(first)
	return r, nil
}
