package phases

import (
	"fmt"
	"reflect"
	"time"
)

// sim drives an upgrade the way the coordinator does: commit the commit
// actions, and complete work actions in an order the test chooses. After
// every transition it checks the invariants of SPEC §3, §4 and §6 against an
// oracle written from the spec, not from the step graph's own Deps.
type sim struct {
	t       fataler
	u       *Upgrade
	now     time.Time
	gate    Gate
	history []string // step IDs in the order they started
	// versions records each node's version to check it never goes back.
	versions map[string]Version
	// pick chooses which of n pending work items completes next.
	pick func(n int) int
	// fail decides whether a work item fails.
	fail func(a Action) bool
	// spec is the cluster as the state machine keeps it: MIG pools'
	// membership changes applied as results land.
	spec *ClusterSpec
	// observe, when set, runs after every transition.
	observe func()
	// noRetry leaves failed nodes failed (for failure budgets) instead of
	// retrying them at once as an operator would.
	noRetry bool
}

func newSim(t fataler, c *ClusterSpec, to Version, opts Options) *sim {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	spec := *c
	spec.Pools = append([]Pool(nil), c.Pools...)
	for i := range spec.Pools {
		spec.Pools[i].Nodes = append([]Node(nil), c.Pools[i].Nodes...)
	}
	s := &sim{t: t, u: NewUpgrade(UpgradeID(c.Name, to, 1), c, to, opts, now), now: now, gate: Open, spec: &spec,
		versions: map[string]Version{}, pick: func(int) int { return 0 }, fail: func(Action) bool { return false }}
	for _, n := range s.u.Nodes {
		s.versions[n.Node] = n.Version
	}
	return s
}

// step runs one tick: it commits every commit action, then completes one
// work action. It returns false when nothing is left to do.
func (s *sim) step() bool {
	s.t.Helper()
	d := Decide(s.u, s.now, s.gate)
	if again := Decide(s.u, s.now, s.gate); !reflect.DeepEqual(d, again) {
		s.t.Fatalf("Decide is not deterministic:\n%v\n%v", d.Actions, again.Actions)
	}
	var work []Action
	for _, a := range d.Actions {
		if a.Commits() {
			if a.Kind == ActStartStep {
				s.checkOrder(a.Step)
				s.history = append(s.history, a.Step)
			}
			if err := s.u.Apply(a, s.now); err != nil {
				s.t.Fatalf("fresh action %s refused: %v\n%s", a.ID, err, describe(s.u, s.now))
			}
			// Applying the same action twice must be refused as stale.
			if a.Kind != ActPause && a.Kind != ActResume {
				if err := s.u.Apply(a, s.now); err == nil {
					s.t.Fatalf("action %s applied twice", a.ID)
				}
			}
			s.checkBudgets()
			continue
		}
		work = append(work, a)
	}
	s.now = s.now.Add(time.Second)
	if s.observe != nil {
		s.observe()
	}
	if len(work) == 0 {
		committed := false
		for _, a := range d.Actions {
			committed = committed || a.Commits()
		}
		if !committed && !d.NextWake.IsZero() && d.NextWake.After(s.now) {
			// Nothing to do until a soak or a retry falls due.
			s.now = d.NextWake
			return true
		}
		return committed
	}
	a := work[s.pick(len(work))%len(work)]
	ok := !s.fail(a)
	var err error
	switch a.Kind {
	case ActRunStep:
		err = s.u.ApplyStepResult(StepResult{Upgrade: a.Upgrade, Step: a.Step, Attempt: a.Attempt, OK: ok, Message: "sim"}, s.now)
	case ActRunPoolWork:
		r := PoolWorkResult{Upgrade: a.Upgrade, Pool: a.Pool, Work: a.Reason, Phase: BlueGreenPhase(a.Phase), Attempt: a.Attempt, OK: ok, Message: "sim"}
		if a.Reason == WorkCreateGreen {
			r.Green = simGreen(s.u, a.Pool)
		}
		m := s.u.PoolWorkMembership(r)
		if err = s.u.ApplyPoolWorkResult(r, s.now); err == nil {
			s.spec.ApplyMembership(m)
			if dup := s.u.ApplyPoolWorkResult(r, s.now); dup == nil {
				s.t.Fatalf("result for %s applied twice", a.ID)
			}
		}
		if !ok {
			s.now = s.now.Add(StepRetryInterval)
		}
	default:
		r := NodeStepResult{Upgrade: a.Upgrade, Node: a.Node, Cursor: a.Cursor, Attempt: a.Attempt, OK: ok}
		m := s.u.NodeResultMembership(r)
		err = s.u.ApplyNodeStepResult(r, s.now)
		if after, _ := s.u.Node(a.Node); err == nil && after.State == StateRunning && after.Cursor == a.Cursor && after.Attempt == a.Attempt {
			// The node waits at its step (a red or soaking gate): the
			// step is looked at again, and the next result counts.
		} else if err == nil {
			s.spec.ApplyMembership(m)
			// A duplicate report (agent retry, new leader) is stale.
			if dup := s.u.ApplyNodeStepResult(NodeStepResult{Upgrade: a.Upgrade, Node: a.Node, Cursor: a.Cursor, Attempt: a.Attempt, OK: ok}, s.now); dup == nil {
				s.t.Fatalf("result for %s applied twice", a.ID)
			}
		}
		n, _ := s.u.Node(a.Node)
		if n.Version.Less(s.versions[n.Node]) && !n.Rollback {
			s.t.Fatalf("node %s went back from %s to %s", n.Node, s.versions[n.Node], n.Version)
		}
		s.versions[n.Node] = n.Version
		if !ok && !s.noRetry {
			if err := s.u.RetryNode(a.Node, s.now); err != nil {
				s.t.Fatalf("retry %s: %v", a.Node, err)
			}
		}
	}
	if err != nil {
		s.t.Fatalf("fresh result for %s refused: %v", a.ID, err)
	}
	if a.Kind == ActRunStep && !ok {
		s.now = s.now.Add(StepRetryInterval)
	}
	s.checkBudgets()
	if s.observe != nil {
		s.observe()
	}
	return true
}

// simGreen is what createGreen reports: one green group per blue group,
// as large as blue is in that zone.
func simGreen(u *Upgrade, pool string) []GreenGroup {
	p, _ := u.Pool(pool)
	var out []GreenGroup
	for _, g := range p.Groups {
		gg := GreenGroup{Zone: g.Zone, Name: GreenGroupName(g.Name, u.ID)}
		for _, n := range u.PoolNodes(p) {
			if n.Zone == g.Zone {
				gg.Nodes = append(gg.Nodes, ReplacementName(gg.Name, u.ID, n.Node))
			}
		}
		out = append(out, gg)
	}
	return out
}

func (s *sim) run(maxTicks int) {
	s.t.Helper()
	for i := 0; i < maxTicks; i++ {
		if !s.step() {
			return
		}
	}
	s.t.Fatalf("upgrade not finished after %d ticks: state %s", maxTicks, s.u.State)
}

// checkOrder asserts SPEC §4 when step id starts, from roles alone.
func (s *sim) checkOrder(id string) {
	s.t.Helper()
	st, _ := s.u.Step(id)
	doneRole := func(r Role) bool {
		for _, o := range s.u.Steps {
			if o.Kind == StepPool && o.Role == r && o.State != StateDone {
				return false
			}
		}
		return true
	}
	var need []Role
	switch {
	case st.Kind == StepPool && st.Role == RoleControlPlane:
		need = []Role{RoleControlPlaneLB}
	case st.Kind == StepAddons, st.Kind == StepLifecycle, st.Kind == StepPool && st.Role == RoleLoadBalancer:
		need = []Role{RoleControlPlaneLB, RoleControlPlane}
	case st.Kind == StepPool && st.Role == RoleWorker:
		need = []Role{RoleControlPlaneLB, RoleControlPlane, RoleLoadBalancer}
	case st.Kind == StepHealth:
		for _, o := range s.u.Steps {
			if o.ID != id && o.State != StateDone {
				s.t.Fatalf("health started before %s was done", o.ID)
			}
		}
	}
	for _, r := range need {
		if !doneRole(r) {
			s.t.Fatalf("step %s started before every %s pool was done (history %v)", id, r, s.history)
		}
	}
}

// checkBudgets asserts pool budgets and one-at-a-time control planes.
func (s *sim) checkBudgets() {
	s.t.Helper()
	for i := range s.u.Pools {
		p := &s.u.Pools[i]
		busy, down := 0, 0
		for _, n := range s.u.PoolNodes(p) {
			if n.State == StateRunning || n.State == StateFailed && p.MaxFailedNodes == 0 {
				busy++
			}
			if n.State == StateRunning || n.State == StateFailed {
				down++
			}
		}
		if busy > p.Concurrency && p.Strategy != StrategySurge {
			s.t.Fatalf("pool %s: %d nodes busy, concurrency %d", p.Name, busy, p.Concurrency)
		}
		if p.Role == RoleControlPlane && busy > 1 {
			s.t.Fatalf("control-plane nodes overlap: %d busy", busy)
		}
		if p.Count-down < p.MinAvailable {
			s.t.Fatalf("pool %s: %d schedulable, minimum %d", p.Name, p.Count-down, p.MinAvailable)
		}
	}
}

// fataler is what sim needs of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func (s *sim) String() string { return fmt.Sprint(s.history) }
