package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/maintenance"
)

// TestEndOfSupportForcesEveryCluster: a cluster on no channel, and one on
// a channel whose target is still on the unsupported minor, are moved to
// the next minor's newest release at the end of support, through windows
// and exclusions; before it, their status says what will happen and when.
func TestEndOfSupportForcesEveryCluster(t *testing.T) {
	eos := t0.Add(3 * day)
	cat := catalog("", "1.31.10", "1.31.12", "1.32.0", "1.32.9", "1.33.4")
	cat.Channels[ChannelStable] = Channel{Name: ChannelStable, Target: v("1.31.12")}
	cat.EndOfSupport[31] = eos
	p := saturdays()
	p.Exclusions = []maintenance.Exclusion{{Name: "freeze", Start: t0, End: eos.Add(day)}}
	manual := cluster("manual", "1.31.10")
	manual.Channel = ChannelNone
	manual.Policy = compile(t, p)
	stuck := cluster("stuck", "1.31.12")
	stuck.Channel = ChannelStable
	behind := cluster("behind", "1.31.10") // a newer patch on the minor: still the next minor
	behind.Channel = ChannelStable
	f := &Fleet{Catalog: cat, Clusters: []Cluster{manual, stuck}}

	// Before: manual only / up to date, and what the end of support does.
	p0 := Evaluate(f, t0)
	require.Empty(t, p0.Starts())
	require.Equal(t, eos, p0.Wake)
	for _, d := range p0.Decisions {
		require.Contains(t, []StatusState{StateManualOnly, StateUpToDate}, d.Status.State, d.Cluster)
		require.Equal(t, v("1.32.9"), d.Status.Next, d.Cluster)
		require.Equal(t, eos, d.Status.NextOpportunity, d.Cluster)
		require.Equal(t, eos, d.Status.EndOfSupport, d.Cluster)
		require.Contains(t, d.Status.Message, "then it is upgraded automatically to 1.32.9", d.Cluster)
	}

	// At the end of support: all three, inside the exclusion, outside the
	// window (a Thursday).
	f.Clusters = append(f.Clusters, behind)
	p1 := Evaluate(f, eos)
	require.Len(t, p1.Starts(), 3)
	for _, d := range p1.Starts() {
		require.True(t, d.EndOfSupport, d.Cluster)
		require.Equal(t, maintenance.KindMinor, d.Kind, d.Cluster)
		require.Equal(t, v("1.32.9"), d.To, d.Cluster)
		require.Contains(t, d.Reason, "forced through maintenance windows and exclusions", d.Cluster)
		again, ok := EvaluateCluster(f, d.Cluster, eos)
		require.True(t, ok)
		require.Equal(t, d, again)
	}
	require.Equal(t, []string{"behind", "manual", "stuck"}, names(p1.Decisions))
	require.Contains(t, p1.Decisions[1].Reason, "(not on a release channel)")
	require.Contains(t, p1.Decisions[2].Reason, "(channel stable targets 1.31.12)")

	// A channel whose target is on the next minor bounds the step.
	cat.Channels[ChannelStable] = Channel{Name: ChannelStable, Target: v("1.32.0")}
	d := one(t, &Fleet{Catalog: cat, Clusters: []Cluster{stuck}}, eos)
	require.Equal(t, v("1.32.0"), d.To)
	require.True(t, d.EndOfSupport)

	// Several minors behind: one forced minor after another.
	cat.EndOfSupport[32] = eos
	old := cluster("old", "1.31.12")
	old.Channel = ""
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{old}}, eos)
	require.Equal(t, v("1.32.9"), d.To)
	old.Current = v("1.32.9")
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{old}}, eos.Add(time.Hour))
	require.Equal(t, v("1.33.4"), d.To, "on to the oldest supported minor")
	require.True(t, d.EndOfSupport)

	// The backoff still holds a forced step.
	old.Auto = State{Failures: 1, NextAttempt: eos.Add(2 * time.Hour)}
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{old}}, eos.Add(time.Hour))
	require.Equal(t, ActNone, d.Action)
	require.Equal(t, StateBackoff, d.Status.State)
	require.Equal(t, eos.Add(2*time.Hour), d.Status.NextOpportunity, "forced: the backoff's end, whatever the window")

	// Nothing to move to: blocked, and it says so.
	lone := cluster("lone", "1.33.4")
	lone.Channel = ChannelNone
	cat.EndOfSupport[33] = eos
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{lone}}, eos)
	require.Equal(t, ActNone, d.Action)
	require.Equal(t, StateBlockedByRule, d.Status.State)
	require.Equal(t, RuleNoRelease, d.Status.BlockedBy[0].Name)
	require.Contains(t, d.Status.Message, "past its end of support")
	require.True(t, d.Wake.IsZero(), "no wake in the past")
}
