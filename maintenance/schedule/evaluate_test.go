package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

var t0 = time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC) // a Monday

const day = 24 * time.Hour

func v(s string) phases.Version { return phases.MustParseVersion(s) }

func catalog(target string, versions ...string) Catalog {
	c := Catalog{EndOfSupport: map[int]time.Time{}, Channels: map[string]Channel{}}
	for _, s := range versions {
		c.Versions = append(c.Versions, v(s))
	}
	if target != "" {
		c.Channels[ChannelRegular] = Channel{Name: ChannelRegular, Target: v(target)}
	}
	return c
}

func cluster(name, version string) Cluster {
	return Cluster{Name: name, Kind: phases.KindStandalone, Channel: ChannelRegular, Current: v(version)}
}

func compile(t *testing.T, p maintenance.Policy) *maintenance.Compiled {
	t.Helper()
	c, err := p.Compile()
	require.NoError(t, err)
	return c
}

// saturdays is a weekly Saturday window, 00:00–24:00.
func saturdays() maintenance.Policy {
	return maintenance.Policy{Window: &maintenance.Window{
		Start: time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC), End: time.Date(2027, 1, 3, 0, 0, 0, 0, time.UTC), Recurrence: "FREQ=WEEKLY;BYDAY=SA"}}
}

func one(t *testing.T, f *Fleet, now time.Time) Decision {
	t.Helper()
	p := Evaluate(f, now)
	require.Len(t, p.Decisions, 1)
	d := p.Decisions[0]
	again, ok := EvaluateCluster(f, d.Cluster, now)
	require.True(t, ok)
	require.Equal(t, d, again, "EvaluateCluster agrees with Evaluate")
	return d
}

func TestManualAndUpToDate(t *testing.T) {
	for _, ch := range []string{"", ChannelNone, "beta"} {
		c := cluster("a", "1.33.1")
		c.Channel = ch
		d := one(t, &Fleet{Catalog: catalog("1.33.2", "1.33.1", "1.33.2"), Clusters: []Cluster{c}}, t0)
		require.Equal(t, StateManualOnly, d.Status.State, ch)
		require.Equal(t, ActNone, d.Action)
	}
	d := one(t, &Fleet{Catalog: catalog("", "1.33.1", "1.33.2"), Clusters: []Cluster{cluster("a", "1.33.1")}}, t0)
	require.Equal(t, StateUpToDate, d.Status.State)
	require.Contains(t, d.Status.Message, "no auto-upgrade target")
	d = one(t, &Fleet{Catalog: catalog("1.33.2", "1.33.1", "1.33.2"), Clusters: []Cluster{cluster("a", "1.33.2")}}, t0)
	require.Equal(t, StateUpToDate, d.Status.State)
	require.Equal(t, ActNone, d.Action)
}

func TestNextStep(t *testing.T) {
	tests := []struct {
		name, current, target string
		catalog               []string
		next                  string
		kind                  maintenance.ChangeKind
	}{
		{"patch inside the minor", "1.33.1", "1.33.3", []string{"1.33.1", "1.33.2", "1.33.3", "1.33.4"}, "1.33.3", maintenance.KindPatch},
		{"patches first, then the minor", "1.33.1", "1.34.2", []string{"1.33.1", "1.33.5", "1.34.0", "1.34.2"}, "1.33.5", maintenance.KindPatch},
		{"the minor at the newest patch", "1.33.5", "1.34.2", []string{"1.33.5", "1.34.0", "1.34.2", "1.34.3"}, "1.34.2", maintenance.KindMinor},
		{"never two minors at once", "1.32.9", "1.34.2", []string{"1.32.9", "1.33.0", "1.33.4", "1.34.2"}, "1.33.4", maintenance.KindMinor},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := one(t, &Fleet{Catalog: catalog(tc.target, tc.catalog...), Clusters: []Cluster{cluster("a", tc.current)}}, t0)
			require.Equal(t, ActStart, d.Action, d.Status.Message)
			require.Equal(t, v(tc.next), d.To)
			require.Equal(t, tc.kind, d.Kind)
			require.Equal(t, StateStarting, d.Status.State)
			require.Equal(t, v(tc.target), d.Status.Target)
			require.Contains(t, d.Reason, "channel regular targets "+tc.target)
		})
	}
	d := one(t, &Fleet{Catalog: catalog("1.35.0", "1.33.5", "1.35.0"), Clusters: []Cluster{cluster("a", "1.33.5")}}, t0)
	require.Equal(t, StateBlockedByRule, d.Status.State)
	require.Equal(t, RuleNoRelease, d.Status.BlockedBy[0].Name)
}

func TestCatchUpOneMinorPerMonth(t *testing.T) {
	cat := catalog("1.35.1", "1.32.9", "1.33.4", "1.34.2", "1.35.1")
	c := cluster("a", "1.33.4")
	c.Auto.LastMinorAt = t0.Add(-10 * day)
	d := one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, ActNone, d.Action)
	require.Equal(t, StateBlockedByRule, d.Status.State)
	require.Equal(t, Block{Kind: BlockRule, Name: RuleCatchUpPace, Until: t0.Add(20 * day), Detail: d.Status.BlockedBy[0].Detail}, d.Status.BlockedBy[0])
	require.Equal(t, t0.Add(20*day), d.Wake)
	require.Equal(t, t0.Add(20*day), d.Status.NextOpportunity)

	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0.Add(20*day))
	require.Equal(t, ActStart, d.Action)
	require.Equal(t, v("1.34.2"), d.To)

	// One minor behind is not catching up: no pace.
	c = cluster("a", "1.34.2")
	c.Auto.LastMinorAt = t0.Add(-day)
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, ActStart, d.Action)
	require.Equal(t, v("1.35.1"), d.To)

	// The channel's default counts too: behind a default two minors ahead.
	cat.Channels[ChannelRegular] = Channel{Name: ChannelRegular, Default: v("1.35.1"), Target: v("1.34.2")}
	c = cluster("a", "1.33.4")
	c.Auto.LastMinorAt = t0.Add(-day)
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, RuleCatchUpPace, d.Status.BlockedBy[0].Name)
}

func TestWindowsAndExclusions(t *testing.T) {
	cat := catalog("1.34.2", "1.33.4", "1.33.5", "1.34.2")
	sat := time.Date(2027, 3, 6, 0, 0, 0, 0, time.UTC)
	c := cluster("a", "1.33.4")
	c.Policy = compile(t, saturdays())
	d := one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, ActNone, d.Action)
	require.Equal(t, StateWaitingForWindow, d.Status.State)
	require.Equal(t, []Block{{Kind: BlockWindow, Name: "window", Until: sat, Detail: "outside the maintenance window"}}, d.Status.BlockedBy)
	require.Equal(t, sat, d.Status.NextOpportunity)
	require.Equal(t, sat, d.Wake)
	require.Equal(t, v("1.33.5"), d.Status.Next)

	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, sat.Add(time.Hour))
	require.Equal(t, ActStart, d.Action)
	require.Equal(t, v("1.33.5"), d.To)

	// A no_minor_upgrades exclusion lets the patch through and holds the minor.
	p := saturdays()
	p.Exclusions = []maintenance.Exclusion{{Name: "q1-freeze", Start: t0, End: t0.Add(30 * day), Scope: maintenance.ScopeNoMinorUpgrades}}
	c.Policy = compile(t, p)
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, sat.Add(time.Hour))
	require.Equal(t, ActStart, d.Action, "the patch is not covered")
	c.Current = v("1.33.5")
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, sat.Add(time.Hour))
	require.Equal(t, ActNone, d.Action)
	require.Equal(t, StateBlockedExclusion, d.Status.State)
	require.Equal(t, BlockExclusion, d.Status.BlockedBy[0].Kind)
	require.Equal(t, "q1-freeze", d.Status.BlockedBy[0].Name)
	require.Equal(t, t0.Add(30*day), d.Status.BlockedBy[0].Until)
	// The first Saturday after the freeze.
	require.Equal(t, time.Date(2027, 4, 3, 0, 0, 0, 0, time.UTC), d.Status.NextOpportunity)

	c.PolicyInvalid, c.Policy = true, nil
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, sat.Add(time.Hour))
	require.Equal(t, ActNone, d.Action, "an invalid policy fails closed")
	require.Equal(t, RulePolicyInvalid, d.Status.BlockedBy[0].Name)
}

func TestEndOfSupportForcesThrough(t *testing.T) {
	cat := catalog("1.34.2", "1.33.4", "1.33.5", "1.34.2")
	eos := t0.Add(-day)
	cat.EndOfSupport[33] = eos
	p := saturdays()
	p.Exclusions = []maintenance.Exclusion{{Name: "freeze", Start: t0.Add(-2 * day), End: t0.Add(2 * day)}}
	c := cluster("a", "1.33.4")
	c.Policy = compile(t, p)
	c.Auto.LastMinorAt = t0.Add(-day) // the pace does not hold an unsupported minor either
	d := one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, ActStart, d.Action, d.Status.Message)
	require.True(t, d.EndOfSupport)
	require.Equal(t, v("1.34.2"), d.To, "straight to the next minor, not the patch")
	require.Equal(t, maintenance.KindMinor, d.Kind)
	require.Contains(t, d.Reason, "end of support")
	require.Contains(t, d.Reason, "forced through maintenance windows and exclusions")

	// Before the end of support it waits, and wakes at the date.
	cat.EndOfSupport[33] = t0.Add(3 * day)
	c.Current = v("1.33.5")
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, ActNone, d.Action)
	require.Equal(t, t0.Add(2*day), d.Wake, "the freeze ends before the end of support")
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0.Add(2*day+time.Hour)) // a Wednesday: window closed
	require.Equal(t, t0.Add(3*day), d.Wake, "the end of support is the next change")
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0.Add(3*day))
	require.Equal(t, ActStart, d.Action)
	require.True(t, d.EndOfSupport)
}

func TestBackoffAndRecord(t *testing.T) {
	require.Equal(t, time.Hour, Backoff(1))
	require.Equal(t, 2*time.Hour, Backoff(2))
	require.Equal(t, 16*time.Hour, Backoff(5))
	require.Equal(t, 24*time.Hour, Backoff(6))
	require.Equal(t, 24*time.Hour, Backoff(60))

	cat := catalog("1.33.5", "1.33.4", "1.33.5")
	c := cluster("a", "1.33.4")
	c.Auto = State{Failures: 2, Last: &Attempt{Upgrade: "a-1.33.5-3", From: v("1.33.4"), To: v("1.33.5"), Kind: maintenance.KindPatch, StartedAt: t0}}
	c.Upgrade = &Upgrade{ID: "a-1.33.5-3", From: v("1.33.4"), To: v("1.33.5"), State: phases.UpgradePreflight, Automatic: true}
	d := one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0.Add(time.Minute))
	require.Equal(t, ActNone, d.Action, "nothing to record while it runs")
	require.Equal(t, StateRunning, d.Status.State)

	c.Upgrade.State, c.Upgrade.FinishedAt, c.Upgrade.RefusedChecks = phases.UpgradeRefused, t0.Add(2*time.Minute), []string{"deprecated-apis", "nodes-ready"}
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0.Add(3*time.Minute))
	require.Equal(t, ActRecord, d.Action)
	require.Equal(t, OutcomeRefused, d.Record.Outcome)
	require.Equal(t, "preflight failed: deprecated-apis, nodes-ready", d.Record.Detail)
	require.Equal(t, 3, d.State.Failures)
	require.Equal(t, t0.Add(2*time.Minute+4*time.Hour), d.State.NextAttempt)
	require.Equal(t, StatePreflightFailed, d.Status.State)
	require.Equal(t, []Block{
		{Kind: BlockCheck, Name: "deprecated-apis", Until: d.State.NextAttempt, Detail: "preflight check failed"},
		{Kind: BlockCheck, Name: "nodes-ready", Until: d.State.NextAttempt, Detail: "preflight check failed"},
	}, d.Status.BlockedBy)

	// Recorded: it waits out the backoff, then starts again.
	c.Auto = d.State
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0.Add(time.Hour))
	require.Equal(t, ActNone, d.Action)
	require.Equal(t, c.Auto.NextAttempt, d.Wake)
	require.Equal(t, c.Auto.NextAttempt, d.Status.NextAttempt)
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, c.Auto.NextAttempt)
	require.Equal(t, ActStart, d.Action)

	// A failed or cancelled attempt backs off the same way, as "backoff".
	c.Upgrade.State = phases.UpgradeCancelled
	c.Auto = State{Last: &Attempt{Upgrade: "a-1.33.5-3", Kind: maintenance.KindPatch, StartedAt: t0}}
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0.Add(3*time.Minute))
	require.Equal(t, ActRecord, d.Action)
	require.Equal(t, StateBackoff, d.Status.State)
	require.Equal(t, t0.Add(2*time.Minute+time.Hour), d.State.NextAttempt)

	// Done clears it and paces catch-up from a minor's start.
	c.Upgrade.State = phases.UpgradeDone
	c.Current = v("1.33.5")
	c.Auto = State{Failures: 4, NextAttempt: t0, Last: &Attempt{Upgrade: "a-1.33.5-3", Kind: maintenance.KindMinor, StartedAt: t0}}
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0.Add(3*time.Minute))
	require.Equal(t, ActRecord, d.Action)
	require.Equal(t, State{LastMinorAt: t0, Last: d.Record}, d.State)
	require.Equal(t, StateUpToDate, d.Status.State)
}

func TestPausedAtWindowEnd(t *testing.T) {
	cat := catalog("1.33.5", "1.33.4", "1.33.5")
	c := cluster("a", "1.33.4")
	c.Policy = compile(t, saturdays())
	c.Upgrade = &Upgrade{ID: "a-1.33.5-1", From: v("1.33.4"), To: v("1.33.5"), State: phases.UpgradeRunning, Automatic: true, PauseReason: "MAINTENANCE_WINDOW"}
	d := one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, StatePausedAtWindowEnd, d.Status.State)
	sat := time.Date(2027, 3, 6, 0, 0, 0, 0, time.UTC)
	require.Equal(t, sat, d.Status.NextOpportunity)
	require.Equal(t, sat, d.Wake, "the leader wakes when the window opens to resume it")
	require.Equal(t, BlockWindow, d.Status.BlockedBy[0].Kind)
}

func TestFleetOrder(t *testing.T) {
	cat := catalog("1.34.2", "1.33.7", "1.34.2")
	admin := cluster("adm", "1.33.7")
	admin.Kind = phases.KindAdmin
	user := func(name, ver string) Cluster {
		u := cluster(name, ver)
		u.Kind, u.Admin = phases.KindUser, "adm"
		return u
	}
	f := &Fleet{Catalog: cat, Clusters: []Cluster{user("u1", "1.33.7"), user("u2", "1.33.7"), admin}}
	p := Evaluate(f, t0)
	require.Equal(t, []string{"adm", "u1", "u2"}, names(p.Decisions), "the admin cluster first")
	require.Len(t, p.Starts(), 1)
	require.Equal(t, "adm", p.Starts()[0].Cluster)
	for _, d := range p.Decisions[1:] {
		require.Equal(t, StateBlockedByRule, d.Status.State)
		require.Equal(t, Block{Kind: BlockSkew, Name: "adm", Detail: d.Status.BlockedBy[0].Detail}, d.Status.BlockedBy[0])
	}

	// A user cluster a minor behind holds its admin back; it goes first.
	f.Clusters[0].Current = v("1.32.9")
	cat.Versions = append([]phases.Version{v("1.32.9")}, cat.Versions...)
	f.Catalog = cat
	p = Evaluate(f, t0)
	require.Equal(t, BlockSkew, p.Decisions[0].Status.BlockedBy[0].Kind)
	require.Equal(t, "u1", p.Decisions[0].Status.BlockedBy[0].Name)
	require.Equal(t, []string{"u1"}, names(p.Starts()))
	require.Equal(t, v("1.33.7"), p.Starts()[0].To)

	// Once the admin leads, one user at a time (the family's limit).
	f.Clusters = []Cluster{user("u1", "1.33.7"), user("u2", "1.33.7"), admin}
	f.Clusters[2].Current = v("1.34.2")
	p = Evaluate(f, t0)
	require.Equal(t, []string{"u1"}, names(p.Starts()))
	require.Equal(t, RuleFamilyLimit, p.Decisions[2].Status.BlockedBy[0].Name)
	f.Limits.PerFamily = 2
	require.Equal(t, []string{"u1", "u2"}, names(Evaluate(f, t0).Starts()))

	// Separate families upgrade side by side, unless the fleet is capped.
	f = &Fleet{Catalog: cat, Clusters: []Cluster{cluster("a", "1.33.7"), cluster("b", "1.33.7"), cluster("c", "1.34.2")}}
	require.Equal(t, []string{"a", "b"}, names(Evaluate(f, t0).Starts()))
	f.Limits.Fleet = 1
	p = Evaluate(f, t0)
	require.Equal(t, []string{"a"}, names(p.Starts()))
	require.Equal(t, RuleFleetLimit, p.Decisions[1].Status.BlockedBy[0].Name)
	// An upgrade in progress counts.
	f.Clusters[0].Upgrade = &Upgrade{ID: "a-x", State: phases.UpgradeRunning}
	require.Empty(t, Evaluate(f, t0).Starts())
}

func TestMixedClusterHoldsOtherVersions(t *testing.T) {
	cat := catalog("1.33.6", "1.33.4", "1.33.5", "1.33.6")
	c := cluster("a", "1.33.4")
	c.Upgrade = &Upgrade{ID: "a-1.33.5-1", From: v("1.33.4"), To: v("1.33.5"), State: phases.UpgradeCancelled, Mixed: true}
	d := one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, RuleMixedCluster, d.Status.BlockedBy[0].Name)
}

func names(ds []Decision) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Cluster)
	}
	return out
}
