package statemachine

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/maintenance/schedule"
	"github.com/moltproject/molt/phases"
)

// TestAutoStartRechecksThePolicy: a start decided while the window was
// open lands on a state where it is closed (the leader's clock moved, the
// policy changed): refused as stale; an end of support lets it through.
func TestAutoStartRechecksThePolicy(t *testing.T) {
	sat := time.Date(2027, 3, 6, 10, 0, 0, 0, time.UTC)
	mon := sat.Add(2 * 24 * time.Hour)
	s := &yearSim{t: t, m: New(), now: sat.Add(-30 * 24 * time.Hour), clusters: map[string]*yearCluster{}}
	v := phases.MustParseVersion
	s.must(PutReleaseCmd{Release: yearRelease("1.33.4", mon.Add(-time.Hour)), Now: s.now})
	s.must(PutReleaseCmd{Release: yearRelease("1.34.2", time.Time{}), Now: s.now})
	s.must(PutChannelCmd{Channel: "regular", AutoUpgradeTarget: v("1.34.2"), Now: s.now})
	s.register(&yearCluster{name: "shop", kind: phases.KindStandalone, channel: "regular", version: "1.33.4", workers: 1,
		win: &winSpec{weekday: time.Saturday, hours: 24}})

	start := func(at time.Time, eos bool) error {
		_, err := s.apply(AutoStartCmd{Cluster: "shop", To: v("1.34.2"), Kind: maintenance.KindMinor, EndOfSupport: eos, Reason: "r",
			Preflight: &PreflightRun{ID: "shop-1", Cluster: "shop", Target: v("1.34.2"), CreatedAt: at, Deadline: at.Add(time.Minute)}, Now: at})
		return err
	}
	require.ErrorIs(t, start(mon, false), phases.ErrStale, "outside the window")
	require.ErrorIs(t, start(sat, true), phases.ErrStale, "the end of support is not reached on Saturday")

	st, err := s.m.UpgradeStatus("shop", mon, schedule.Limits{})
	require.NoError(t, err)
	require.Equal(t, schedule.StateStarting, st.State, "past its end of support, due at once: %s", st.Message)

	require.NoError(t, start(mon, true), "forced through the closed window")
	r, err := s.m.Cluster("shop")
	require.NoError(t, err)
	require.True(t, r.Upgrade.Options.EndOfSupport)
	require.True(t, r.Auto.Last.EndOfSupport)

	st, err = s.m.UpgradeStatus("shop", mon, schedule.Limits{})
	require.NoError(t, err)
	require.Equal(t, schedule.StateRunning, st.State)
	require.Equal(t, v("1.34.2"), st.Next)
	require.Equal(t, "r", st.LastAttempt.Reason)
	_, err = s.m.UpgradeStatus("nope", mon, schedule.Limits{})
	require.ErrorIs(t, err, ErrNotFound)
}

// TestChannels: every known channel is listed; a default falls back to
// the newest release that lists the channel.
func TestChannels(t *testing.T) {
	f := machineAt(t, firstOf(t, CmdAutoStart))
	chs := f.Channels()
	require.Len(t, chs, 3)
	require.Equal(t, "rapid", chs[0].Name)
	require.True(t, chs[0].DefaultVersion.IsZero())
	require.Equal(t, ChannelRecord{Name: "regular", DefaultVersion: phases.MustParseVersion("1.34.4"), AutoUpgradeTarget: phases.MustParseVersion("1.34.5"),
		UpdatedAt: chs[1].UpdatedAt}, chs[1])
	require.False(t, chs[1].UpdatedAt.IsZero())

	f = machineAt(t, firstOf(t, CmdPutChannel))
	chs = f.Channels()
	require.Equal(t, "1.34.5", chs[1].DefaultVersion.String(), "the newest release listing regular")
	require.True(t, chs[1].AutoUpgradeTarget.IsZero())
}

// TestAutoStartEndOfSupportAnyChannel: the state machine applies a start
// forced by an end of support for a cluster on no channel and for one
// whose channel's target is still on the unsupported minor, and only then.
func TestAutoStartEndOfSupportAnyChannel(t *testing.T) {
	eos := time.Date(2027, 5, 1, 0, 0, 0, 0, time.UTC)
	s := &yearSim{t: t, m: New(), now: eos.Add(-30 * 24 * time.Hour), clusters: map[string]*yearCluster{}}
	v := phases.MustParseVersion
	s.must(PutReleaseCmd{Release: yearRelease("1.31.12", eos), Now: s.now})
	s.must(PutReleaseCmd{Release: yearRelease("1.32.9", time.Time{}), Now: s.now})
	s.must(PutChannelCmd{Channel: "stable", AutoUpgradeTarget: v("1.31.12"), Now: s.now})
	for _, c := range []*yearCluster{
		{name: "manual", kind: phases.KindStandalone, channel: "none", version: "1.31.12", workers: 1},
		{name: "stuck", kind: phases.KindStandalone, channel: "stable", version: "1.31.12", workers: 1},
	} {
		s.register(c)
	}
	start := func(name string, at time.Time, forced bool) error {
		_, err := s.apply(AutoStartCmd{Cluster: name, To: v("1.32.9"), Kind: maintenance.KindMinor, EndOfSupport: forced, Reason: "r",
			Preflight: &PreflightRun{ID: name + "-1", Cluster: name, Target: v("1.32.9"), CreatedAt: at, Deadline: at.Add(time.Minute)}, Now: at})
		return err
	}
	for _, name := range []string{"manual", "stuck"} {
		require.ErrorIs(t, start(name, eos, false), phases.ErrStale, "%s: not forced, not allowed", name)
		require.ErrorIs(t, start(name, eos.Add(-time.Minute), true), phases.ErrStale, "%s: before the end of support", name)
		require.NoError(t, start(name, eos, true), name)
		r, err := s.m.Cluster(name)
		require.NoError(t, err)
		require.True(t, r.Upgrade.Options.EndOfSupport, name)
		require.True(t, r.Upgrade.Options.Automatic, name)
	}
}

// TestSchedulerFleetSharesNoMemory: the fleet the scheduler reads holds
// a copy of a refused upgrade's blocking checks, not the upgrade's own
// list. Found by TestPropertyCommandSequences.
func TestSchedulerFleetSharesNoMemory(t *testing.T) {
	entries := goldenEntries()
	at := slices.IndexFunc(entries, func(e goldenEntry) bool { return e.cmd.Type() == CmdAutoRecord }) // auto refused by its preflight
	f := machineAt(t, at)
	want, err := f.Upgrade("auto")
	require.NoError(t, err)
	require.NotEmpty(t, want.RefusedChecks)

	fleet := f.SchedulerFleet(schedule.Limits{})
	i := slices.IndexFunc(fleet.Clusters, func(c schedule.Cluster) bool { return c.Name == "auto" })
	require.NotEqual(t, -1, i)
	fleet.Clusters[i].Upgrade.RefusedChecks[0] = "changed"
	got, err := f.Upgrade("auto")
	require.NoError(t, err)
	require.Equal(t, want.RefusedChecks, got.RefusedChecks, "changing the fleet changed the upgrade")
}
