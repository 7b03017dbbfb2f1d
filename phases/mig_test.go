package phases

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// migCluster is a cluster with one bare-metal control-plane node and a MIG
// worker pool "mig" of perZone nodes in each of zones z0, z1, …
func migCluster(strategy string, zones, perZone int, settings func(*UpgradeSettings)) *ClusterSpec {
	c := &ClusterSpec{Name: "c1", Kind: KindStandalone, Version: MustParseVersion("1.33.6"),
		Cloud: &CloudSpec{Provider: CloudMemory},
		Pools: []Pool{{Name: "cp", Role: RoleControlPlane, Nodes: []Node{{Name: "cp-0"}}}}}
	p := Pool{Name: "mig", Role: RoleWorker, Backing: BackingMIG, Settings: UpgradeSettings{Strategy: strategy}}
	for z := range zones {
		zone := fmt.Sprintf("z%d", z)
		p.Groups = append(p.Groups, InstanceGroup{Zone: zone, Name: "mig-" + zone})
		for i := range perZone {
			p.Nodes = append(p.Nodes, Node{Name: fmt.Sprintf("mig-%s-%d", zone, i), Zone: zone})
		}
	}
	if settings != nil {
		settings(&p.Settings)
	}
	c.Pools = append(c.Pools, p)
	return c
}

func ptr[T any](v T) *T { return &v }

var (
	v1336 = MustParseVersion("1.33.6")
	v1344 = MustParseVersion("1.34.4")
	mig   = Options{StepLayout: StepLayoutMIG}
)

// surgeModel checks, after every transition, what SPEC §7 promises of a
// surge pool, from each node's position on its step list read as what has
// happened to its machines: instances that may exist (a replacement from
// the moment its creation may start, the old node until its deletion
// finished) stay at most size + maxSurge per zone; nodes serving (Ready,
// not cordoned) stay at least size − maxUnavailable per zone (not for spot
// pools, which drain before the replacement is Ready); zones go one after
// another; at most 20 nodes of a zone are in flight.
type surgeModel struct {
	t       *testing.T
	s       *sim
	maxSize int // largest pool size seen
	minSize int
	zones   []string // zones in the order they started
}

func (m *surgeModel) check() {
	u := m.s.u
	p, _ := u.Pool("mig")
	perZone, exist, serving, inFlight := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	busyZones := map[string]bool{}
	for _, n := range u.PoolNodes(p) {
		perZone[n.Zone]++
		busy := n.State == StateRunning || n.State == StateFailed
		steps := p.StepsOf(&n)
		at := func(k NodeStepKind) int { return slices.IndexFunc(steps, func(s NodeStep) bool { return s.Kind == k }) }
		started := func(k NodeStepKind) bool { return n.State == StateDone || busy && at(k) >= 0 && n.Cursor >= at(k) }
		finished := func(k NodeStepKind) bool { return n.State == StateDone || busy && at(k) >= 0 && n.Cursor > at(k) }
		instances, up := 1, true
		if busy {
			busyZones[n.Zone] = true
			inFlight[n.Zone]++
			switch n.Path {
			case PathMain:
				if !finished(NodeDeleteInstance) {
					instances++ // the replacement may exist beside the node
				}
				up = !started(NodeCordon) || finished(NodeWaitReplacement)
			case PathUnavailable:
				up = false
			case PathRollback:
				instances++ // the replacement being undone
				up = false
			}
		}
		exist[n.Zone] += instances
		if up {
			serving[n.Zone]++
		}
	}
	require.LessOrEqual(m.t, len(busyZones), 1, "zones go one after another: %v busy", busyZones)
	for z := range busyZones {
		if len(m.zones) == 0 || m.zones[len(m.zones)-1] != z {
			require.NotContains(m.t, m.zones, z, "zone %s went back to work after another zone", z)
			m.zones = append(m.zones, z)
		}
	}
	spot := p.NodeSteps[1].Kind != NodeWaitReplacement
	for z, n := range perZone {
		require.LessOrEqual(m.t, inFlight[z], MaxSurgeInFlight)
		require.LessOrEqual(m.t, exist[z], n+p.MaxSurge, "zone %s: %d instances may exist, pool has %d, maxSurge %d", z, exist[z], n, p.MaxSurge)
		m.maxSize = max(m.maxSize, exist[z])
		if !spot && !p.RollingBack {
			require.GreaterOrEqual(m.t, serving[z], n-p.MaxUnavailable, "zone %s: %d serving of %d, maxUnavailable %d", z, serving[z], n, p.MaxUnavailable)
			m.minSize = min(m.minSize, serving[z])
		}
	}
}

// TestSurgeExample is SPEC §7's example: one zone, 5 nodes, maxSurge 2,
// maxUnavailable 1: the pool stays between 4 and 7 nodes, and ends with
// every node replaced and the spec listing the replacements.
func TestSurgeExample(t *testing.T) {
	c := migCluster(StrategySurge, 1, 5, func(s *UpgradeSettings) { s.MaxSurge, s.MaxUnavailable = ptr(2), ptr(1) })
	require.NoError(t, c.Validate())
	s := newSim(t, c, v1344, mig)
	m := &surgeModel{t: t, s: s, minSize: 1 << 30}
	s.observe = m.check
	s.run(10_000)
	require.Equal(t, UpgradeDone, s.u.State)
	require.Equal(t, 7, m.maxSize, "two surge instances beside five nodes")
	require.Equal(t, 4, m.minSize, "one node down at a time")
	p, _ := s.u.Pool("mig")
	var replaced, recreated int
	for _, n := range s.u.PoolNodes(p) {
		require.Equal(t, v1344, n.Version)
		switch n.Path {
		case PathMain:
			replaced++
			require.Equal(t, ReplacementName("mig-z0", s.u.ID, n.Node), n.Current)
		case PathUnavailable:
			recreated++
			require.Empty(t, n.Current)
		}
	}
	require.Positive(t, replaced)
	require.Positive(t, recreated)
	sp, _ := s.spec.Pool("mig")
	require.Len(t, sp.Nodes, 5)
	var live []string
	for _, n := range sp.Nodes {
		live = append(live, n.Name)
	}
	for _, n := range s.u.PoolNodes(p) {
		require.Contains(t, live, n.Live())
	}
}

// TestSurgeZonesOneAfterAnother runs three zones with random completion
// orders and checks the surge model at every transition.
func TestSurgeZonesOneAfterAnother(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		surge := rapid.IntRange(0, 3).Draw(rt, "maxSurge")
		unavailable := rapid.IntRange(0, 3).Draw(rt, "maxUnavailable")
		if surge+unavailable == 0 {
			surge = 1
		}
		spot := rapid.Bool().Draw(rt, "spot")
		c := migCluster(StrategySurge, 3, rapid.IntRange(1, 6).Draw(rt, "perZone"), func(s *UpgradeSettings) {
			s.MaxSurge, s.MaxUnavailable = ptr(surge), ptr(unavailable)
		})
		c.Pools[1].Spot = spot
		require.NoError(rt, c.Validate())
		s := newSim(t, c, v1344, mig)
		s.pick = func(n int) int { return rapid.IntRange(0, n-1).Draw(rt, "pick") }
		s.fail = func(a Action) bool { return rapid.IntRange(0, 9).Draw(rt, "fail") == 0 }
		m := &surgeModel{t: t, s: s, minSize: 1 << 30}
		s.observe = m.check
		s.run(100_000)
		require.Equal(t, UpgradeDone, s.u.State)
		require.Equal(t, []string{"z0", "z1", "z2"}, m.zones)
	})
}

// TestSurgeRollback upgrades part of a surge pool, then rolls it back:
// every node touched goes back to the old version (replaced again, or its
// replacement undone), the step ends rolled back and the upgrade is
// cancelled, no longer blocking.
func TestSurgeRollback(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		c := migCluster(StrategySurge, 2, 3, func(s *UpgradeSettings) {
			s.MaxSurge, s.MaxUnavailable = ptr(rapid.IntRange(1, 2).Draw(rt, "surge")), ptr(rapid.IntRange(0, 1).Draw(rt, "unavailable"))
		})
		s := newSim(t, c, v1344, mig)
		s.pick = func(n int) int { return rapid.IntRange(0, n-1).Draw(rt, "pick") }
		after := rapid.IntRange(1, 40).Draw(rt, "rollbackAfter")
		m := &surgeModel{t: t, s: s, minSize: 1 << 30}
		s.observe = m.check
		ticks := 0
		for ticks < after && s.step() {
			ticks++
		}
		step, _ := s.u.Step("pool/mig")
		err := s.u.PoolCommand("mig", PoolRollback, s.now)
		if step.State != StateRunning {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		m.zones = nil // back in reverse zone order, still one zone at a time
		s.run(10_000)
		require.Equal(t, UpgradeCancelled, s.u.State)
		step, _ = s.u.Step("pool/mig")
		require.Equal(t, StateRolledBack, step.State)
		p, _ := s.u.Pool("mig")
		for _, n := range s.u.PoolNodes(p) {
			require.Equal(t, v1336, n.Version, "node %s", n.Node)
			require.Contains(t, []State{StatePending, StateDone}, n.State)
			require.Empty(t, n.Replacement, "node %s", n.Node)
		}
		require.ErrorIs(t, s.u.PoolCommand("mig", PoolResume, s.now), ErrCommandRefused)
	})
}

// TestBlueGreenPhases runs a blue/green pool through its five phases with
// batches and soaks, and checks the order, the batch sizes, the soak times
// and that blue ends deleted with the green groups as the pool's.
func TestBlueGreenPhases(t *testing.T) {
	c := migCluster(StrategyBlueGreen, 2, 3, func(s *UpgradeSettings) {
		s.BlueGreen = &BlueGreenSettings{BatchNodeCount: ptr(2), BatchSoak: 10 * time.Minute, NodePoolSoak: ptr(time.Hour)}
	})
	require.NoError(t, c.Validate())
	s := newSim(t, c, v1344, mig)
	var phases []BlueGreenPhase
	var draining [][]string
	var soakStart, deleteStart time.Time
	s.observe = func() {
		p, _ := s.u.Pool("mig")
		bg := p.BlueGreen
		if bg.Phase != "" && (len(phases) == 0 || phases[len(phases)-1] != bg.Phase) {
			phases = append(phases, bg.Phase)
			switch bg.Phase {
			case PhaseSoaking:
				soakStart = s.now
			case PhaseDeletingBlue:
				deleteStart = s.now
			}
		}
		var now []string
		for _, n := range s.u.PoolNodes(p) {
			if n.State == StateRunning && n.Cursor == 1 {
				now = append(now, n.Node)
			}
		}
		require.LessOrEqual(t, len(now), 2, "a batch drains 2 nodes at most")
		if len(now) > 0 && (len(draining) == 0 || !slices.Equal(draining[len(draining)-1], now)) {
			draining = append(draining, now)
		}
	}
	s.run(10_000)
	require.Equal(t, UpgradeDone, s.u.State)
	require.Equal(t, []BlueGreenPhase{PhaseCreatingGreen, PhaseCordoningBlue, PhaseDrainingBlue, PhaseSoaking, PhaseDeletingBlue, PhaseCompleted}, phases)
	require.GreaterOrEqual(t, deleteStart.Sub(soakStart), time.Hour, "the pool soaks an hour")
	p, _ := s.u.Pool("mig")
	require.Equal(t, 3, p.BlueGreen.Batch, "6 nodes in batches of 2")
	require.Equal(t, 3*10*time.Minute+time.Hour, p.BlueGreen.Soaked)
	sp, _ := s.spec.Pool("mig")
	require.Equal(t, []InstanceGroup{{Zone: "z0", Name: GreenGroupName("mig-z0", s.u.ID)}, {Zone: "z1", Name: GreenGroupName("mig-z1", s.u.ID)}}, sp.Groups)
	require.Len(t, sp.Nodes, 6)
	for _, n := range sp.Nodes {
		require.False(t, slices.ContainsFunc(c.Pools[1].Nodes, func(b Node) bool { return b.Name == n.Name }), "blue node %s still listed", n.Name)
	}
	require.Equal(t, map[Version]int{v1344: 6}, s.u.PoolVersionCounts(p))
}

// TestBlueGreenSoakCap: once batch soaks reach 7 days in all, blue is
// deleted at once after the last batch, without a pool soak.
func TestBlueGreenSoakCap(t *testing.T) {
	c := migCluster(StrategyBlueGreen, 1, 3, func(s *UpgradeSettings) {
		s.BlueGreen = &BlueGreenSettings{BatchNodeCount: ptr(1), BatchSoak: 3 * 24 * time.Hour, NodePoolSoak: ptr(time.Hour)}
	})
	s := newSim(t, c, v1344, mig)
	var phases []BlueGreenPhase
	s.observe = func() {
		p, _ := s.u.Pool("mig")
		if bg := p.BlueGreen; bg.Phase != "" && (len(phases) == 0 || phases[len(phases)-1] != bg.Phase) {
			phases = append(phases, bg.Phase)
		}
	}
	start := s.now
	s.run(10_000)
	require.Equal(t, UpgradeDone, s.u.State)
	require.NotContains(t, phases, PhaseSoaking)
	p, _ := s.u.Pool("mig")
	require.Equal(t, MaxTotalSoak, p.BlueGreen.Soaked, "3 + 3 + 1 (capped) days")
	require.Less(t, s.now.Sub(start), MaxTotalSoak+time.Hour)
}

// TestBlueGreenBatchZeroSkipsDraining: a batch size of zero goes from
// cordoning straight to the soak.
func TestBlueGreenBatchZeroSkipsDraining(t *testing.T) {
	for _, set := range []BlueGreenSettings{{BatchNodeCount: ptr(0)}, {BatchPercentage: ptr(0.0)}} {
		c := migCluster(StrategyBlueGreen, 1, 2, func(s *UpgradeSettings) { s.BlueGreen = &set })
		s := newSim(t, c, v1344, mig)
		drained := false
		s.observe = func() {
			p, _ := s.u.Pool("mig")
			drained = drained || p.BlueGreen.Phase == PhaseDrainingBlue
		}
		s.run(10_000)
		require.Equal(t, UpgradeDone, s.u.State)
		require.False(t, drained)
	}
}

func TestBlueGreenBatchSize(t *testing.T) {
	for _, tc := range []struct {
		set   *BlueGreenSettings
		nodes int
		want  int
	}{
		{nil, 5, 1},
		{&BlueGreenSettings{}, 5, 1},
		{&BlueGreenSettings{BatchNodeCount: ptr(3)}, 5, 3},
		{&BlueGreenSettings{BatchNodeCount: ptr(9)}, 5, 5},
		{&BlueGreenSettings{BatchNodeCount: ptr(0)}, 5, 0},
		{&BlueGreenSettings{BatchPercentage: ptr(0.5)}, 5, 2},
		{&BlueGreenSettings{BatchPercentage: ptr(0.01)}, 5, 1},
		{&BlueGreenSettings{BatchPercentage: ptr(0.29)}, 100, 29},
		{&BlueGreenSettings{BatchPercentage: ptr(1.0)}, 7, 7},
		{&BlueGreenSettings{BatchPercentage: ptr(0.0)}, 7, 0},
	} {
		require.Equal(t, tc.want, tc.set.BatchSize(tc.nodes), "%+v of %d", tc.set, tc.nodes)
	}
}

// TestBlueGreenRollbackInEachPhase rolls back from each of the first four
// phases: green is deleted, blue nodes pending again, the step rolled back.
func TestBlueGreenRollbackInEachPhase(t *testing.T) {
	for _, at := range []BlueGreenPhase{PhaseCreatingGreen, PhaseCordoningBlue, PhaseDrainingBlue, PhaseSoaking} {
		t.Run(string(at), func(t *testing.T) {
			c := migCluster(StrategyBlueGreen, 1, 4, func(s *UpgradeSettings) {
				s.BlueGreen = &BlueGreenSettings{BatchNodeCount: ptr(2), NodePoolSoak: ptr(time.Hour)}
			})
			s := newSim(t, c, v1344, mig)
			for {
				p, _ := s.u.Pool("mig")
				if p.BlueGreen.Phase == at {
					break
				}
				require.True(t, s.step())
			}
			require.NoError(t, s.u.PoolCommand("mig", PoolRollback, s.now))
			s.run(10_000)
			require.Equal(t, UpgradeCancelled, s.u.State)
			p, _ := s.u.Pool("mig")
			require.Equal(t, PhaseRolledBack, p.BlueGreen.Phase)
			require.Equal(t, at, p.BlueGreen.RollbackFrom)
			st, _ := s.u.Step("pool/mig")
			require.Equal(t, StateRolledBack, st.State)
			sp, _ := s.spec.Pool("mig")
			require.Equal(t, c.Pools[1].Groups, sp.Groups)
			require.ElementsMatch(t, c.Pools[1].Nodes, sp.Nodes, "green nodes left the pool, blue ones stayed")
			require.Equal(t, map[Version]int{v1336: 4}, s.u.PoolVersionCounts(p))
		})
	}
}

// TestPoolCommandLegality is each command in each phase of each strategy:
// allowed, or refused naming its rule.
func TestPoolCommandLegality(t *testing.T) {
	type row struct{ cancel, resume, rollback, complete string }
	ok := ""
	bg := map[BlueGreenPhase]row{
		PhaseCreatingGreen: {ok, "not-cancelled", ok, "complete-outside-soak"},
		PhaseCordoningBlue: {ok, "not-cancelled", ok, "complete-outside-soak"},
		PhaseDrainingBlue:  {ok, "not-cancelled", ok, "complete-outside-soak"},
		PhaseSoaking:       {ok, "not-cancelled", ok, ok},
		PhaseDeletingBlue:  {"cancel-during-delete", "not-cancelled", "rollback-during-delete", "complete-outside-soak"},
		PhaseCompleted:     {"cancel-after-done", "not-cancelled", "rollback-after-done", "complete-outside-soak"},
	}
	for phase, want := range bg {
		for cmd, rule := range map[string]string{PoolCancel: want.cancel, PoolResume: want.resume, PoolRollback: want.rollback, PoolComplete: want.complete} {
			t.Run(fmt.Sprintf("blueGreen/%s/%s", phase, cmd), func(t *testing.T) {
				c := migCluster(StrategyBlueGreen, 1, 2, nil)
				s := newSim(t, c, v1344, mig)
				for {
					p, _ := s.u.Pool("mig")
					if p.BlueGreen.Phase == phase {
						break
					}
					require.True(t, s.step(), "never reached %s", phase)
				}
				checkCommand(t, s.u, cmd, rule)
			})
		}
	}
	surge := map[string]row{
		"pending": {ok, "not-cancelled", "rollback-before-start", "complete-blue-green-only"},
		"running": {ok, "not-cancelled", ok, "complete-blue-green-only"},
		"done":    {"cancel-after-done", "not-cancelled", "rollback-after-done", "complete-blue-green-only"},
	}
	for where, want := range surge {
		for cmd, rule := range map[string]string{PoolCancel: want.cancel, PoolResume: want.resume, PoolRollback: want.rollback, PoolComplete: want.complete} {
			t.Run(fmt.Sprintf("surge/%s/%s", where, cmd), func(t *testing.T) {
				c := migCluster(StrategySurge, 1, 2, nil)
				s := newSim(t, c, v1344, mig)
				for {
					st, _ := s.u.Step("pool/mig")
					if string(st.State) == where {
						break
					}
					require.True(t, s.step(), "never reached %s", where)
				}
				checkCommand(t, s.u, cmd, rule)
			})
		}
	}
	t.Run("bare metal rollback", func(t *testing.T) {
		u := NewUpgrade("u", testCluster(0, 1, 0, 2), v1344, mig, time.Time{})
		checkPoolCommand(t, u, "w0", PoolRollback, "rollback-bare-metal")
		checkPoolCommand(t, u, "w0", PoolComplete, "complete-blue-green-only")
	})
}

func checkCommand(t *testing.T, u *Upgrade, cmd, rule string) {
	t.Helper()
	checkPoolCommand(t, u, "mig", cmd, rule)
}

func checkPoolCommand(t *testing.T, u *Upgrade, pool, cmd, rule string) {
	t.Helper()
	rev := u.Revision
	err := u.PoolCommand(pool, cmd, time.Unix(1e9, 0))
	if rule == "" {
		require.NoError(t, err)
		require.Greater(t, u.Revision, rev)
		return
	}
	var ce *CommandError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, rule, ce.Rule)
	require.Equal(t, rev, u.Revision, "a refused command changes nothing")
}

// TestCancelHaltsTheUpgrade: a cancelled pool lets its started nodes
// finish, then halts; with nothing else to run the upgrade is cancelled
// (no longer blocking); resume runs it to its end.
func TestCancelHaltsTheUpgrade(t *testing.T) {
	c := testCluster(0, 1, 0, 4)
	c.Pools[1].Settings.ConcurrentNodes = 2
	s := newSim(t, c, v1344, mig)
	for {
		p, _ := s.u.Pool("w0")
		if countState(s.u.PoolNodes(p), StateRunning) == 2 {
			break
		}
		require.True(t, s.step())
	}
	require.NoError(t, s.u.PoolCommand("w0", PoolCancel, s.now))
	for s.step() {
	}
	require.Equal(t, UpgradeCancelled, s.u.State)
	require.False(t, s.u.InProgress())
	p, _ := s.u.Pool("w0")
	require.Equal(t, 2, countState(s.u.PoolNodes(p), StateDone), "the two started nodes finished")
	require.Equal(t, 2, countState(s.u.PoolNodes(p), StatePending))
	st, _ := s.u.Step("pool/w0")
	require.Equal(t, StateCancelled, st.State)
	require.NoError(t, s.u.PoolCommand("w0", PoolResume, s.now))
	require.Equal(t, UpgradeRunning, s.u.State)
	s.run(10_000)
	require.Equal(t, UpgradeDone, s.u.State)
}

// TestClosedUpgradeIsNotResumed: a cancelled upgrade whose cluster changed
// refuses resume.
func TestClosedUpgradeIsNotResumed(t *testing.T) {
	u := NewUpgrade("u", testCluster(0, 1, 0, 2), v1344, mig, time.Time{})
	require.NoError(t, u.PoolCommand("w0", PoolCancel, time.Time{}))
	u.State, u.Closed = UpgradeCancelled, true
	var ce *CommandError
	require.ErrorAs(t, u.PoolCommand("w0", PoolResume, time.Time{}), &ce)
	require.Equal(t, "resume-after-change", ce.Rule)
}

// TestSurgeWaitsForQuota: a step that reports a wait (no quota) keeps the
// node at its step, not failed, and runs again at RetryAt.
func TestSurgeWaitsForQuota(t *testing.T) {
	c := migCluster(StrategySurge, 1, 1, nil)
	s := newSim(t, c, v1344, mig)
	var create Action
	for create.ID == "" {
		for _, a := range Decide(s.u, s.now, Open).Actions {
			if a.NodeStep.Kind == NodeCreateReplacement {
				create = a
			}
		}
		if create.ID == "" {
			require.True(t, s.step())
		}
	}
	retry := s.now.Add(time.Minute)
	require.NoError(t, s.u.ApplyNodeStepResult(NodeStepResult{Upgrade: create.Upgrade, Node: create.Node, Cursor: create.Cursor,
		Attempt: create.Attempt, Wait: "quota: 0 of 10 instances free in z0", RetryAt: retry}, s.now))
	n, _ := s.u.Node(create.Node)
	require.Equal(t, StateRunning, n.State)
	require.Equal(t, "quota: 0 of 10 instances free in z0", n.Waiting)
	d := Decide(s.u, s.now, Open)
	require.Empty(t, d.Actions)
	require.Equal(t, retry, d.NextWake)
	d = Decide(s.u, retry, Open)
	require.Equal(t, []string{create.ID}, actionIDs(d.Actions), "the same step, under the same ID, runs again")
}

func actionIDs(as []Action) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

// TestLegacyLayoutKeepsSurgeNodeSteps: upgrades laid out before the MIG
// strategies keep the node step list they had, so their logs replay.
func TestLegacyLayoutKeepsSurgeNodeSteps(t *testing.T) {
	c := migCluster(StrategySurge, 1, 2, nil)
	u := NewUpgrade("u", c, v1344, Options{StepLayout: StepLayoutNoLifecycle}, time.Time{})
	p, _ := u.Pool("mig")
	require.Equal(t, SurgeNodeSteps(), p.NodeSteps)
	require.Empty(t, p.Strategy)
	require.Empty(t, p.Groups)
}

func TestMIGValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  func(c *ClusterSpec)
		rule string
	}{
		{"no cloud", func(c *ClusterSpec) { c.Cloud = nil }, "cloud-required"},
		{"unknown adapter", func(c *ClusterSpec) { c.Cloud.Provider = "azure" }, "cloud-provider"},
		{"gce without project", func(c *ClusterSpec) { c.Cloud.Provider = CloudGCE }, "cloud-provider"},
		{"no groups", func(c *ClusterSpec) { c.Pools[1].Groups = nil }, "pool-groups"},
		{"two groups in a zone", func(c *ClusterSpec) { c.Pools[1].Groups[1].Zone = "z0" }, "pool-groups"},
		{"bad group name", func(c *ClusterSpec) { c.Pools[1].Groups[0].Name = "9x" }, "pool-groups"},
		{"node outside the zones", func(c *ClusterSpec) { c.Pools[1].Nodes[0].Zone = "z9" }, "node-zone"},
		{"surge budget zero", func(c *ClusterSpec) { c.Pools[1].Settings.MaxSurge = ptr(0) }, "surge-budget"},
		{"surge budget over 20", func(c *ClusterSpec) {
			c.Pools[1].Settings.MaxSurge, c.Pools[1].Settings.MaxUnavailable = ptr(15), ptr(6)
		}, "surge-budget"},
		{"concurrentNodes on mig", func(c *ClusterSpec) { c.Pools[1].Settings.ConcurrentNodes = 2 }, "strategy"},
		{"blue/green settings on surge", func(c *ClusterSpec) { c.Pools[1].Settings.BlueGreen = &BlueGreenSettings{} }, "strategy"},
		{"both batch settings", func(c *ClusterSpec) {
			c.Pools[1].Settings = UpgradeSettings{Strategy: StrategyBlueGreen, BlueGreen: &BlueGreenSettings{BatchNodeCount: ptr(1), BatchPercentage: ptr(0.5)}}
		}, "blue-green-batch"},
		{"percentage over 1", func(c *ClusterSpec) {
			c.Pools[1].Settings = UpgradeSettings{Strategy: StrategyBlueGreen, BlueGreen: &BlueGreenSettings{BatchPercentage: ptr(1.5)}}
		}, "blue-green-batch"},
		{"soak over 7 days", func(c *ClusterSpec) {
			c.Pools[1].Settings = UpgradeSettings{Strategy: StrategyBlueGreen, BlueGreen: &BlueGreenSettings{NodePoolSoak: ptr(8 * 24 * time.Hour)}}
		}, "blue-green-soak"},
		{"maxSurge on blue/green", func(c *ClusterSpec) {
			c.Pools[1].Settings = UpgradeSettings{Strategy: StrategyBlueGreen, MaxSurge: ptr(1)}
		}, "strategy"},
		{"groups on bare metal", func(c *ClusterSpec) { c.Pools[0].Groups = []InstanceGroup{{Zone: "a", Name: "a"}} }, "pool-backing"},
		{"bad autoscaling", func(c *ClusterSpec) { c.Pools[1].Autoscaling = &Autoscaling{MinNodes: 3, MaxNodes: 2} }, "pool-autoscaling"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := migCluster(StrategySurge, 2, 2, nil)
			require.NoError(t, c.Validate())
			tc.mut(c)
			var ve *ValidationError
			require.ErrorAs(t, c.Validate(), &ve)
			require.Equal(t, tc.rule, ve.Rule)
		})
	}
}

// TestPlanMIG: a dry run of MIG pools needs no cloud call and shows the
// batches zone by zone, the size range, blue/green's phases and soaks with
// the 7-day cap.
func TestPlanMIG(t *testing.T) {
	start := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	c := migCluster(StrategySurge, 2, 5, func(s *UpgradeSettings) { s.MaxSurge, s.MaxUnavailable = ptr(2), ptr(1) })
	plan := MakePlan(c, v1344, mig, DefaultDurations(), start)
	st := plan.Steps[slices.IndexFunc(plan.Steps, func(s PlannedStep) bool { return s.ID == "pool/mig" })]
	require.Equal(t, StrategySurge, st.Strategy)
	require.Equal(t, &SizeRange{Min: 9, Max: 12}, st.SizeRange)
	require.Len(t, st.Batches, 4, "two zones of 5 nodes, 3 at a time, one zone after the other")
	require.Equal(t, []string{"mig-z0-0", "mig-z0-1", "mig-z0-2"}, st.Batches[0].Nodes)
	require.Equal(t, []string{"mig-z1-3", "mig-z1-4"}, st.Batches[3].Nodes)

	c = migCluster(StrategyBlueGreen, 1, 4, func(s *UpgradeSettings) {
		s.BlueGreen = &BlueGreenSettings{BatchPercentage: ptr(0.5), BatchSoak: 2 * time.Hour}
	})
	plan = MakePlan(c, v1344, mig, DefaultDurations(), start)
	st = plan.Steps[slices.IndexFunc(plan.Steps, func(s PlannedStep) bool { return s.ID == "pool/mig" })]
	require.Equal(t, &SizeRange{Min: 4, Max: 8}, st.SizeRange)
	require.Equal(t, &PlannedSoak{Batch: 2 * time.Hour, Pool: time.Hour, Total: 5 * time.Hour}, st.Soak)
	var names []BlueGreenPhase
	for _, p := range st.Phases {
		names = append(names, p.Phase)
	}
	require.Equal(t, []BlueGreenPhase{PhaseCreatingGreen, PhaseCordoningBlue, PhaseDrainingBlue, PhaseSoaking, PhaseDeletingBlue}, names)
	require.Len(t, st.Batches, 2)

	c.Pools[1].Settings.BlueGreen.BatchSoak = 4 * 24 * time.Hour
	plan = MakePlan(c, v1344, mig, DefaultDurations(), start)
	st = plan.Steps[slices.IndexFunc(plan.Steps, func(s PlannedStep) bool { return s.ID == "pool/mig" })]
	require.True(t, st.Soak.Capped)
	require.Equal(t, MaxTotalSoak, st.Soak.Total)
	require.Zero(t, st.Soak.Pool)
}
