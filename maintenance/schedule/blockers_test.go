package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// TestEveryBlockerWithItsOwnUntil: a refused attempt backing off for an
// hour and a no_upgrades exclusion for two days both hold the next step;
// both are listed, each with its own end, the message names both, and the
// next opportunity is the exclusion's end.
func TestEveryBlockerWithItsOwnUntil(t *testing.T) {
	cat := catalog("1.33.5", "1.33.4", "1.33.5")
	c := cluster("a", "1.33.4")
	c.Policy = compile(t, maintenance.Policy{Exclusions: []maintenance.Exclusion{
		{Name: "freeze", Start: t0.Add(-time.Hour), End: t0.Add(2 * day), Scope: maintenance.ScopeNoUpgrades}}})
	c.Upgrade = &Upgrade{ID: "a-1", From: v("1.33.4"), To: v("1.33.5"), State: phases.UpgradeRefused, Automatic: true,
		FinishedAt: t0.Add(-time.Minute), RefusedChecks: []string{"nodes-ready"}}
	backoffEnd := t0.Add(time.Hour - time.Minute)
	c.Auto = State{Failures: 1, NextAttempt: backoffEnd, Last: &Attempt{Upgrade: "a-1", From: v("1.33.4"), To: v("1.33.5"),
		Kind: maintenance.KindPatch, StartedAt: t0.Add(-2 * time.Minute), Outcome: OutcomeRefused, FinishedAt: t0.Add(-time.Minute)}}

	d := one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, ActNone, d.Action)
	require.Equal(t, StatePreflightFailed, d.Status.State, "the first blocker names the state")
	require.Equal(t, []Block{
		{Kind: BlockCheck, Name: "nodes-ready", Until: backoffEnd, Detail: "preflight check failed"},
		{Kind: BlockExclusion, Name: "freeze", Until: t0.Add(2 * day), Detail: "maintenance exclusion (no_upgrades)"},
	}, d.Status.BlockedBy)
	require.Equal(t, t0.Add(2*day), d.Status.NextOpportunity)
	require.Equal(t, backoffEnd, d.Status.NextAttempt)
	require.Equal(t, backoffEnd, d.Wake, "the status changes when the backoff ends")
	require.Contains(t, d.Status.Message, "2 things at once")
	require.Contains(t, d.Status.Message, "check nodes-ready")
	require.Contains(t, d.Status.Message, "exclusion freeze")
	require.Contains(t, d.Status.Message, "next opportunity "+t0.Add(2*day).Format(time.RFC3339))

	// The backoff over, the exclusion alone remains.
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, backoffEnd)
	require.Equal(t, StateBlockedExclusion, d.Status.State)
	require.Len(t, d.Status.BlockedBy, 1)
	require.Equal(t, "freeze", d.Status.BlockedBy[0].Name)

	// A catch-up pace and a closed window together: both, and the
	// opportunity is the first window after the pace's due date.
	cat = catalog("1.35.1", "1.33.4", "1.34.2", "1.35.1")
	c = cluster("a", "1.33.4")
	c.Policy = compile(t, saturdays())
	c.Auto.LastMinorAt = t0.Add(-10 * day)
	d = one(t, &Fleet{Catalog: cat, Clusters: []Cluster{c}}, t0)
	require.Equal(t, StateBlockedByRule, d.Status.State)
	require.Equal(t, []BlockKind{BlockRule, BlockWindow}, kinds(d.Status.BlockedBy))
	require.Equal(t, t0.Add(20*day), d.Status.BlockedBy[0].Until)
	require.Equal(t, time.Date(2027, 3, 27, 0, 0, 0, 0, time.UTC), d.Status.NextOpportunity, "the first Saturday after the pace allows")
}

func kinds(bs []Block) []BlockKind {
	var out []BlockKind
	for _, b := range bs {
		out = append(out, b.Kind)
	}
	return out
}
