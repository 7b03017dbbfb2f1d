package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/maintenance"
)

// TestRegistrationHold: a cluster registered without a policy on a
// channel whose target is ahead starts nothing while held — not even past
// its end of support — and says so with the hold's end, which is also its
// next opportunity and the pass's wake; at the hold's end it starts.
func TestRegistrationHold(t *testing.T) {
	until := t0.Add(day)
	cat := catalog("1.34.2", "1.33.4", "1.33.5", "1.34.2")
	c := cluster("a", "1.33.4")
	c.Auto.HeldUntil = until
	f := &Fleet{Catalog: cat, Clusters: []Cluster{c}}

	d := one(t, f, t0)
	require.Equal(t, ActNone, d.Action, d.Status.Message)
	require.Equal(t, StateBlockedByRule, d.Status.State)
	require.Equal(t, []Block{holdBlock(until)}, d.Status.BlockedBy)
	require.Equal(t, until, d.Status.NextOpportunity)
	require.Equal(t, until, d.Wake)
	require.Equal(t, v("1.33.5"), d.Status.Next)
	require.Contains(t, d.Status.Message, "rule registration-hold")

	d = one(t, f, until.Add(-time.Second))
	require.Equal(t, ActNone, d.Action)
	d = one(t, f, until)
	require.Equal(t, ActStart, d.Action, d.Status.Message)
	require.Equal(t, v("1.33.5"), d.To)

	// Past its end of support the hold still holds: nothing was said yet
	// of when the cluster may be disrupted.
	cat.EndOfSupport[33] = t0.Add(-day)
	f.Catalog = cat
	f.Clusters[0].Current = v("1.33.5")
	d = one(t, f, t0)
	require.Equal(t, ActNone, d.Action)
	require.Equal(t, RuleRegistrationHold, d.Status.BlockedBy[0].Name)
	d = one(t, f, until)
	require.Equal(t, ActStart, d.Action)
	require.True(t, d.EndOfSupport)

	// After the hold, the policy tells the next opportunity: a hold that
	// ends on a Tuesday, a window on Saturdays.
	c = cluster("a", "1.33.4")
	c.Auto.HeldUntil = until
	c.Policy = compile(t, saturdays())
	d = one(t, &Fleet{Catalog: catalog("1.33.5", "1.33.4", "1.33.5"), Clusters: []Cluster{c}}, t0)
	require.Equal(t, RuleRegistrationHold, d.Status.BlockedBy[0].Name)
	require.Equal(t, time.Date(2027, 3, 6, 0, 0, 0, 0, time.UTC), d.Status.NextOpportunity)

	// An up-to-date cluster has nothing to hold.
	c = cluster("a", "1.34.2")
	c.Auto.HeldUntil = until
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, StateUpToDate, d.Status.State)
	require.Empty(t, d.Status.BlockedBy)
}

// TestHoldKeptByOutcomes: recording an attempt's outcome keeps the hold
// (only storing a policy ends it).
func TestHoldKeptByOutcomes(t *testing.T) {
	s := State{HeldUntil: t0.Add(day)}
	s = ApplyOutcome(s, &Attempt{Outcome: OutcomeFailed, Kind: maintenance.KindPatch, FinishedAt: t0})
	require.Equal(t, t0.Add(day), s.HeldUntil)
	require.True(t, Held(s, t0))
	require.False(t, Held(s, t0.Add(day)))
	require.False(t, Held(State{}, t0))
}
