package phases

import (
	"fmt"
	"time"
)

// Durations are the expected times the planner predicts with.
type Durations struct {
	// Node is the expected time of one node's upgrade, per role
	// (cordon → uncordon, drain included).
	Node      map[Role]time.Duration
	Addons    time.Duration
	Lifecycle time.Duration
	Health    time.Duration
	// Instance is a MIG instance's creation until its Node is Ready, and
	// Drain a node's cordon and drain (MIG strategies, plan_mig.go).
	Instance time.Duration
	Drain    time.Duration
	// Agent is one host's molt-agent replacement (the molt step).
	Agent time.Duration
}

// DefaultDurations are conservative guesses for hosts nobody has measured
// yet; the coordinator replaces them with observed averages when it has them.
func DefaultDurations() Durations {
	return Durations{
		Node: map[Role]time.Duration{
			RoleControlPlaneLB: 4 * time.Minute,
			RoleControlPlane:   6 * time.Minute,
			RoleLoadBalancer:   5 * time.Minute,
			RoleWorker:         8 * time.Minute,
		},
		Addons:    5 * time.Minute,
		Lifecycle: 3 * time.Minute,
		Health:    2 * time.Minute,
		Instance:  4 * time.Minute,
		Drain:     3 * time.Minute,
		Agent:     time.Minute,
	}
}

// Batch is a set of nodes predicted to upgrade together.
type Batch struct {
	Index int
	Nodes []string
	Start time.Time
	End   time.Time
}

// PlannedStep is a step of the plan with its predicted timeline.
type PlannedStep struct {
	ID         string
	Kind       StepKind
	Pool       string
	Role       Role
	Deps       []string
	Start      time.Time
	End        time.Time
	Batches    []Batch
	Disruption string
	// MIG pools (plan_mig.go): the strategy, the pool's size range while
	// it upgrades, blue/green's phases and soaks.
	Strategy  string
	SizeRange *SizeRange
	Phases    []PlannedPhase
	Soak      *PlannedSoak
}

// Plan is a dry run: the steps in order, the batches of nodes, a predicted
// timeline, and the disruption each step is expected to cause (SPEC §4).
type Plan struct {
	Cluster string
	From    Version
	To      Version
	Start   time.Time
	End     time.Time
	Steps   []PlannedStep
	// Total is the predicted duration with the configured settings.
	Total time.Duration
	// CriticalPath is a lower bound: the longest dependency chain if every
	// pool used the most parallelism the rules allow (20 nodes at once,
	// control plane one at a time, worker pools side by side).
	CriticalPath time.Duration
	// Waits are the stretches spent waiting for the maintenance window
	// (or the end of an exclusion) of an automatic upgrade (InWindows);
	// WindowNeverOpens is set when the window never opens again for some
	// step, and the timeline after it is not predicted.
	Waits            []PlannedWait
	WindowNeverOpens bool
}

// MakePlan predicts the upgrade of c to version to, starting at start.
func MakePlan(c *ClusterSpec, to Version, opts Options, dur Durations, start time.Time) Plan {
	agents := agentHosts(c, opts)
	steps := buildSteps(c, opts.StepLayout, len(agents) > 0)
	plan := Plan{Cluster: c.Name, From: c.Version, To: to, Start: start}
	end := map[string]time.Time{}
	lower := map[string]time.Duration{}
	// CheckOptions bounds the option before an upgrade is proposed; the
	// clamp keeps a plan of anything else from allocating without bound.
	workerSlots := min(max(opts.ConcurrentWorkerPools, 1), MaxConcurrentWorkerPools)
	slots := make([]time.Time, workerSlots)
	for i := range slots {
		slots[i] = start
	}
	for _, s := range steps {
		ps := PlannedStep{ID: s.ID, Kind: s.Kind, Pool: s.Pool, Role: s.Role, Deps: s.Deps}
		begin := start
		var lb time.Duration
		for _, d := range s.Deps {
			if end[d].After(begin) {
				begin = end[d]
			}
			lb = max(lb, lower[d])
		}
		var length, minimal time.Duration
		slot := -1
		switch s.Kind {
		case StepPool:
			p, _ := c.Pool(s.Pool)
			if s.Role == RoleWorker {
				slot = earliest(slots)
				if slots[slot].After(begin) {
					begin = slots[slot]
				}
			}
			if p.Backing == BackingMIG && opts.StepLayout >= StepLayoutMIG {
				length, minimal = planMIG(&ps, p, dur, begin)
				break
			}
			nodeDur := dur.Node[s.Role]
			if opts.StepLayout >= StepLayoutGates {
				// Each node's gates hold for the longest for: of the
				// cluster's and the pool's gates before the node is done.
				for _, g := range append(append([]HealthGate(nil), c.HealthGates...), p.Settings.HealthGates...) {
					nodeDur = max(nodeDur, dur.Node[s.Role]+g.For)
				}
			}
			width := min(p.Concurrency(), len(p.Nodes)-p.Settings.MinimumAvailableNodes)
			width = max(width, 1)
			at := begin
			for i := 0; i < len(p.Nodes); i += width {
				b := Batch{Index: len(ps.Batches), Start: at, End: at.Add(nodeDur)}
				for _, n := range p.Nodes[i:min(i+width, len(p.Nodes))] {
					b.Nodes = append(b.Nodes, n.Name)
				}
				ps.Batches = append(ps.Batches, b)
				at = b.End
			}
			length = at.Sub(begin)
			widest := 1
			if s.Role != RoleControlPlane {
				widest = max(1, min(MaxConcurrentNodes, len(p.Nodes)-p.Settings.MinimumAvailableNodes))
			}
			minimal = time.Duration(ceilDiv(len(p.Nodes), widest)) * nodeDur
			ps.Disruption = poolDisruption(p, width)
		case StepMolt:
			length, minimal = planMolt(&ps, c, agents, dur, begin)
		case StepBackup:
			ps.Disruption = "none: an etcd snapshot read from one healthy member"
		case StepAddons:
			length, minimal = dur.Addons, dur.Addons
			ps.Disruption = "under 5 min for each add-on operator that is drained and upgraded"
		case StepLifecycle:
			length, minimal = dur.Lifecycle, dur.Lifecycle
			ps.Disruption = "none for workloads: lifecycle controllers restart on their new manifests"
		case StepHealth:
			length, minimal = dur.Health, dur.Health
			ps.Disruption = "none: read-only cluster health checks, retried until they pass"
		}
		ps.Start, ps.End = begin, begin.Add(length)
		end[s.ID] = ps.End
		lower[s.ID] = lb + minimal
		plan.Steps = append(plan.Steps, ps)
		if slot >= 0 {
			slots[slot] = ps.End
		}
		if ps.End.After(plan.End) {
			plan.End = ps.End
		}
		if lower[s.ID] > plan.CriticalPath {
			plan.CriticalPath = lower[s.ID]
		}
	}
	plan.Total = plan.End.Sub(start)
	return plan
}

func earliest(ts []time.Time) int {
	k := 0
	for i := range ts {
		if ts[i].Before(ts[k]) {
			k = i
		}
	}
	return k
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func poolDisruption(p *Pool, width int) string {
	switch p.Role {
	case RoleControlPlaneLB:
		return "short API blip (under 1–2 min) while the control-plane load balancers switch"
	case RoleControlPlane:
		if len(p.Nodes) >= 3 {
			return "none for the API servers, etcd and scheduler of an HA control plane (one node at a time)"
		}
		return "the API server is unavailable while the single control-plane node upgrades"
	case RoleLoadBalancer:
		return fmt.Sprintf("load-balancer nodes upgrade %d at a time; services move to the remaining nodes", width)
	default:
		return fmt.Sprintf("workloads: whatever their replicas and PodDisruptionBudgets allow while %d node(s) at a time drain", width)
	}
}
