package phases

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// moltOptions lay an upgrade out with a molt step to agent 0.2.0; the
// nodes in at are already there.
func moltOptions(at ...string) Options {
	o := Options{StepLayout: StepLayoutMolt, AgentVersion: "0.2.0", AgentTimeout: 5 * time.Minute, AgentVersions: map[string]string{}}
	for _, n := range at {
		o.AgentVersions[n] = "0.2.0"
	}
	return o
}

func agentNodes(u *Upgrade) []string {
	var out []string
	for _, a := range u.Agents {
		out = append(out, a.Node)
	}
	return out
}

// The molt step comes first, before any Kubernetes step, and holds only
// the hosts whose agent is not known to run the release's agent, pool by
// pool in step order (the cluster lists the workers first here). Without
// an agent in the release, or in a layout before StepLayoutMolt, there
// is none.
func TestMoltStepFirstWithHostsOnAnotherAgent(t *testing.T) {
	c := testCluster(1, 3, 1, 2)
	// Workers listed first: the molt step still goes in step order.
	c.Pools = append(c.Pools[3:], c.Pools[:3]...)
	to := MustParseVersion("1.34.4")
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	opts := moltOptions("cp-1", "w0-0")
	opts.AgentVersions["cp-0"] = "0.1.0"
	u := NewUpgrade("u-1", c, to, opts, now)

	require.Equal(t, StepIDMolt, u.Steps[0].ID)
	require.Equal(t, StepMolt, u.Steps[0].Kind)
	require.Empty(t, u.Steps[0].Deps)
	for _, s := range u.Steps[1:] {
		require.NotEmpty(t, s.Deps, "step %s must wait for the molt step", s.ID)
	}
	cplb, _ := u.Step(PoolStepID("cplb"))
	require.Equal(t, []string{StepIDMolt}, cplb.Deps)
	require.Equal(t, []string{"cplb-0", "cp-0", "cp-2", "lb-0", "w0-1"}, agentNodes(u))
	a, _ := u.Agent("cp-0")
	require.Equal(t, "0.1.0", a.From)
	a, _ = u.Agent("cp-2")
	require.Equal(t, "", a.From, "a host nobody heard from is updated all the same")
	require.Nil(t, u.Options.AgentVersions, "the input is not kept: each host's From is")

	plan := MakePlan(c, to, opts, DefaultDurations(), now)
	require.Equal(t, StepIDMolt, plan.Steps[0].ID)
	var batches [][]string
	for _, b := range plan.Steps[0].Batches {
		batches = append(batches, b.Nodes)
	}
	require.Equal(t, [][]string{{"cplb-0"}, {"cp-0"}, {"cp-2"}, {"lb-0"}, {"w0-1"}}, batches)
	require.False(t, plan.Steps[1].Start.Before(plan.Steps[0].End), "Kubernetes steps start after the molt step")

	for name, o := range map[string]Options{
		"no agent in the release": {StepLayout: StepLayoutMolt},
		"layout before molt":      {StepLayout: StepLayoutGates, AgentVersion: "0.2.0"},
	} {
		u := NewUpgrade("u-2", c, to, o, now)
		_, ok := u.Step(StepIDMolt)
		require.False(t, ok, name)
		require.Empty(t, u.Agents, name)
	}
	every := moltOptions()
	for _, p := range c.Pools {
		for _, n := range p.Nodes {
			every.AgentVersions[n.Name] = "0.2.0"
		}
	}
	u = NewUpgrade("u-3", c, to, every, now)
	_, ok := u.Step(StepIDMolt)
	require.False(t, ok, "every agent runs the release: no molt step")
}

// moltRun drives the molt step as the coordinator would: commits what
// Decide commits, and answers each host's work with ok(node).
type moltRun struct {
	t   *testing.T
	u   *Upgrade
	now time.Time
	// started lists hosts in the order they started; maxRunning is the
	// most that ran at once per pool.
	started    []string
	maxRunning map[string]int
	poolSteps  bool
}

func (m *moltRun) step(answer func(node string) (ok bool, msg string, later bool)) bool {
	d := Decide(m.u, m.now, Open)
	progressed := false
	var work []Action
	for _, a := range d.Actions {
		if a.Commits() {
			if a.Kind == ActStartStep && a.Step != StepIDMolt {
				m.poolSteps = true
				continue // stop at the Kubernetes steps
			}
			if err := m.u.Apply(a, m.now); err == nil {
				progressed = true
				if a.Kind == ActStartAgent {
					m.started = append(m.started, a.Node)
				}
			}
			continue
		}
		work = append(work, a)
	}
	running := map[string]int{}
	for _, a := range m.u.Agents {
		if a.State == StateRunning {
			running[a.Pool]++
		}
	}
	for p, n := range running {
		m.maxRunning[p] = max(m.maxRunning[p], n)
	}
	for _, a := range work {
		if a.Kind != ActUpdateAgent {
			continue
		}
		require.Equal(m.t, m.u.AgentOperationID(a.Node, a.Attempt), a.ID)
		ok, msg, later := answer(a.Node)
		if later {
			continue
		}
		v := ""
		if ok {
			v = m.u.Options.AgentVersion
		}
		if err := m.u.ApplyAgentResult(AgentResult{Upgrade: m.u.ID, Node: a.Node, Attempt: a.Attempt, OK: ok, Message: msg, Version: v}, m.now); err == nil {
			progressed = true
		}
	}
	m.now = m.now.Add(time.Second)
	return progressed
}

// Hosts go pool by pool in step order, never more at once than the
// pool's concurrency, and the Kubernetes steps start only once every
// agent runs the release.
func TestMoltStepOrderAndConcurrency(t *testing.T) {
	c := testCluster(0, 3, 0, 5, 4)
	c.Pools[1].Settings.ConcurrentNodes = 2
	c.Pools[2].Settings.ConcurrentNodes = 3
	u := NewUpgrade("u-1", c, MustParseVersion("1.34.4"), moltOptions("w0-3"), time.Unix(0, 0))
	m := &moltRun{t: t, u: u, now: time.Unix(0, 0), maxRunning: map[string]int{}}
	// Each answer comes one tick late, so hosts overlap.
	seen := map[string]bool{}
	for i := 0; i < 100 && !m.poolSteps; i++ {
		m.step(func(n string) (bool, string, bool) {
			if !seen[n] {
				seen[n] = true
				return false, "", true // answered on a later tick
			}
			return true, "", false
		})
		for j := range u.Agents {
			if a := &u.Agents[j]; a.State == StateFailed {
				t.Fatalf("host %s failed: %s", a.Node, a.Error)
			}
		}
	}
	require.True(t, m.poolSteps, "the Kubernetes steps start after the molt step")
	s, _ := u.Step(StepIDMolt)
	require.Equal(t, StateDone, s.State)
	require.Equal(t, []string{"cp-0", "cp-1", "cp-2", "w0-0", "w0-1", "w0-2", "w0-4", "w1-0", "w1-1", "w1-2", "w1-3"}, m.started)
	require.Equal(t, map[string]int{"cp": 1, "w0": 2, "w1": 3}, m.maxRunning)
	for _, a := range u.Agents {
		require.Equal(t, StateDone, a.State)
		require.Equal(t, "0.2.0", a.Version)
	}
}

// A host whose agent fails stops the molt step from starting others;
// once none runs the step fails with that host's reason, and so does the
// upgrade, before any Kubernetes step started.
func TestMoltStepFailsWithTheReason(t *testing.T) {
	c := testCluster(0, 1, 0, 4)
	c.Pools[1].Settings.ConcurrentNodes = 2
	u := NewUpgrade("u-1", c, MustParseVersion("1.34.4"), moltOptions(), time.Unix(0, 0))
	m := &moltRun{t: t, u: u, now: time.Unix(0, 0), maxRunning: map[string]int{}}
	reason := "molt-agent 0.2.0 did not come up: systemd started it 2 times and it stopped each time before it ran; the kept molt-agent 0.1.0 was put back"
	for i := 0; i < 50 && u.State == UpgradeRunning; i++ {
		m.step(func(n string) (bool, string, bool) {
			if n == "w0-0" {
				return false, reason, false
			}
			return true, "", false
		})
	}
	require.Equal(t, UpgradeFailed, u.State)
	require.False(t, m.poolSteps)
	s, _ := u.Step(StepIDMolt)
	require.Equal(t, StateFailed, s.State)
	require.Equal(t, "agent of w0-0: "+reason, s.Message)
	require.Equal(t, "step molt: agent of w0-0: "+reason, u.Reason)
	// w0-1 ran beside w0-0 and finished; the others never started.
	require.Equal(t, []string{"cp-0", "w0-0", "w0-1"}, m.started)
	for _, a := range u.Agents[3:] {
		require.Equal(t, StatePending, a.State, a.Node)
	}
	pool, _ := u.Step(PoolStepID("cp"))
	require.Equal(t, StatePending, pool.State)
}

// A host whose new agent does not report within the agent timeout fails
// with the deadline as its reason; a result after it is stale. Decide
// wakes at the deadline.
func TestMoltStepDeadline(t *testing.T) {
	c := testCluster(0, 1, 0)
	t0 := time.Unix(0, 0)
	u := NewUpgrade("u-1", c, MustParseVersion("1.34.4"), moltOptions(), t0)
	require.NoError(t, u.Apply(Action{ID: "s", Kind: ActStartStep, Upgrade: u.ID, Step: StepIDMolt}, t0))
	d := Decide(u, t0, Open)
	require.Len(t, d.Actions, 1)
	require.Equal(t, ActStartAgent, d.Actions[0].Kind)
	require.NoError(t, u.Apply(d.Actions[0], t0))

	d = Decide(u, t0.Add(4*time.Minute), Open)
	require.Equal(t, ActUpdateAgent, d.Actions[0].Kind)
	require.Equal(t, t0.Add(5*time.Minute), d.NextWake)
	early := Action{ID: "x", Kind: ActFailAgent, Upgrade: u.ID, Node: "cp-0"}
	require.ErrorIs(t, u.Apply(early, t0.Add(4*time.Minute)), ErrStale, "no failure before the deadline")

	d = Decide(u, t0.Add(5*time.Minute), Open)
	require.Equal(t, ActFailAgent, d.Actions[0].Kind)
	require.NoError(t, u.Apply(d.Actions[0], t0.Add(5*time.Minute)))
	a, _ := u.Agent("cp-0")
	require.Equal(t, StateFailed, a.State)
	require.Equal(t, "molt-agent 0.2.0 did not report within 5m0s (agent timeout)", a.Error)
	late := AgentResult{Upgrade: u.ID, Node: "cp-0", OK: true, Version: "0.2.0"}
	require.ErrorIs(t, u.ApplyAgentResult(late, t0.Add(6*time.Minute)), ErrStale)

	d = Decide(u, t0.Add(5*time.Minute), Open)
	require.Equal(t, ActFailStep, d.Actions[0].Kind)
	require.NoError(t, u.Apply(d.Actions[0], t0.Add(5*time.Minute)))
	d = Decide(u, t0.Add(5*time.Minute), Open)
	require.Equal(t, ActHalt, d.Actions[0].Kind)
	require.NoError(t, u.Apply(d.Actions[0], t0.Add(5*time.Minute)))
	require.Equal(t, UpgradeFailed, u.State)
	require.True(t, strings.HasPrefix(u.Reason, "step molt: agent of cp-0: molt-agent 0.2.0 did not report within 5m0s"), u.Reason)
}

// An agent that says it succeeded but runs another release fails.
func TestMoltStepWrongVersionFails(t *testing.T) {
	c := testCluster(0, 1, 0)
	t0 := time.Unix(0, 0)
	u := NewUpgrade("u-1", c, MustParseVersion("1.34.4"), moltOptions(), t0)
	require.NoError(t, u.Apply(Action{ID: "s", Kind: ActStartStep, Upgrade: u.ID, Step: StepIDMolt}, t0))
	require.NoError(t, u.Apply(Decide(u, t0, Open).Actions[0], t0))
	require.NoError(t, u.ApplyAgentResult(AgentResult{Upgrade: u.ID, Node: "cp-0", OK: true, Version: "0.1.0"}, t0))
	a, _ := u.Agent("cp-0")
	require.Equal(t, StateFailed, a.State)
	require.Contains(t, a.Error, `runs molt-agent "0.1.0" after the update, not 0.2.0`)
}
