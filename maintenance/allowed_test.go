package maintenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWindowCrossingMidnight(t *testing.T) {
	// Daily 22:00–04:00.
	c := mustCompile(t, Policy{Window: &Window{Start: at(22 * time.Hour), End: at(28 * time.Hour), Recurrence: "FREQ=DAILY"}})
	tests := []struct {
		name string
		at   time.Time
		open bool
		ends time.Time
	}{
		{"before first occurrence", at(21 * time.Hour), false, time.Time{}},
		{"first occurrence opens", at(22 * time.Hour), true, at(28 * time.Hour)},
		{"after midnight", at(day + 3*time.Hour), true, at(28 * time.Hour)},
		{"end is exclusive", at(28 * time.Hour), false, time.Time{}},
		{"midday closed", at(day + 12*time.Hour), false, time.Time{}},
		{"ten days later, after midnight", at(10*day + time.Hour), true, at(10*day + 4*time.Hour)},
		{"ten days later, before midnight", at(10*day + 23*time.Hour), true, at(11*day + 4*time.Hour)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := c.Allowed(cpPatch, tc.at)
			require.Equal(t, tc.open, d.Allowed)
			require.Equal(t, tc.ends, d.WindowEnds)
			if !tc.open {
				require.Equal(t, []string{BlockedByWindow}, d.BlockedBy)
				require.Equal(t, PauseMaintenanceWindow, d.PauseReason)
			}
		})
	}
}

func TestNormalizeOffsetInput(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	in := Policy{
		Window: &Window{
			Start:      time.Date(2026, 1, 10, 23, 0, 0, 500, paris), // Sat 22:00 UTC
			End:        time.Date(2026, 1, 11, 5, 0, 0, 0, paris),
			Recurrence: " rrule:FREQ=WEEKLY;BYDAY=SA ",
		},
		Exclusions: []Exclusion{{Name: " freeze ", Start: time.Date(2026, 2, 1, 1, 0, 0, 0, paris), End: time.Date(2026, 2, 2, 1, 0, 0, 0, paris)}},
	}
	got := Normalize(in)
	require.Equal(t, time.UTC, got.Window.Start.Location())
	require.Equal(t, time.Date(2026, 1, 10, 22, 0, 0, 0, time.UTC), got.Window.Start)
	require.Equal(t, time.Date(2026, 1, 11, 4, 0, 0, 0, time.UTC), got.Window.End)
	require.Equal(t, "FREQ=WEEKLY;BYDAY=SA", got.Window.Recurrence)
	require.Equal(t, Exclusion{Name: "freeze", Start: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC), Scope: ScopeNoUpgrades}, got.Exclusions[0])
	require.Equal(t, paris, in.Window.Start.Location(), "input untouched")

	c := mustCompile(t, in)
	require.True(t, c.Allowed(cpPatch, time.Date(2026, 1, 17, 23, 30, 0, 0, paris)).Allowed) // Sat 22:30 UTC
	require.False(t, c.Allowed(cpPatch, time.Date(2026, 1, 17, 22, 30, 0, 0, paris)).Allowed)
}

func TestWeeklyWindowWithExclusions(t *testing.T) {
	// Saturday and Sunday 02:00–08:00 (t0 is a Monday).
	p := Policy{
		Window: &Window{Start: at(5*day + 2*time.Hour), End: at(5*day + 8*time.Hour), Recurrence: "FREQ=WEEKLY;BYDAY=SA,SU"},
		Exclusions: []Exclusion{
			{Name: "black-friday", Start: at(12 * day), End: at(14 * day)}, // second weekend
			{Name: "no-minor-q1", Start: at(0), End: at(60 * day), Scope: ScopeNoMinorUpgrades},
			{Name: "nodes-freeze", Start: at(19 * day), End: at(20 * day), Scope: ScopeNoMinorOrNodeUpgrades}, // third Saturday
			{Name: "expired", Start: at(-30 * day), End: at(-20 * day)},
		},
	}
	c := mustCompile(t, p)
	tests := []struct {
		name    string
		ch      Change
		at      time.Time
		want    Decision
		nextAt  time.Time
		hasNext bool
	}{
		{"weekday, outside window", cpPatch, at(2 * day), Decision{BlockedBy: []string{"window"}, PauseReason: PauseMaintenanceWindow}, at(5*day + 2*time.Hour), true},
		{"first Saturday, patch", cpPatch, at(5*day + 3*time.Hour), Decision{Allowed: true, WindowEnds: at(5*day + 8*time.Hour)}, at(5*day + 3*time.Hour), true},
		{"first Saturday, minor", cpMinor, at(5*day + 3*time.Hour), Decision{BlockedBy: []string{"no-minor-q1"}, PauseReason: PauseExclusionNoMinorUpgrades, WindowEnds: at(5*day + 8*time.Hour)}, at(61*day + 2*time.Hour), true},
		{"second weekend excluded", ndPatch, at(12*day + 3*time.Hour), Decision{BlockedBy: []string{"black-friday"}, PauseReason: PauseExclusionNoUpgrades, WindowEnds: at(12*day + 8*time.Hour)}, at(20*day + 2*time.Hour), true}, // third Saturday is node-frozen
		{"third Saturday: nodes frozen", ndPatch, at(19*day + 3*time.Hour), Decision{BlockedBy: []string{"nodes-freeze"}, PauseReason: PauseExclusionNoMinorOrNodeUpgrades, WindowEnds: at(19*day + 8*time.Hour)}, at(20*day + 2*time.Hour), true},
		{"third Saturday: CP patch runs", cpPatch, at(19*day + 3*time.Hour), Decision{Allowed: true, WindowEnds: at(19*day + 8*time.Hour)}, at(19*day + 3*time.Hour), true},
		{"minor, blocked by two and the window", cpMinor, at(12*day + 10*time.Hour), Decision{BlockedBy: []string{"black-friday", "no-minor-q1", "window"}, PauseReason: PauseExclusionNoUpgrades}, at(61*day + 2*time.Hour), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, c.Allowed(tc.ch, tc.at))
			next, ok := c.NextOpportunity(tc.ch, tc.at)
			require.Equal(t, tc.hasNext, ok)
			require.Equal(t, tc.nextAt, next)
			require.True(t, c.Allowed(tc.ch, next).Allowed)
		})
	}
}

func TestOverlappingExclusions(t *testing.T) {
	c := mustCompile(t, Policy{Exclusions: []Exclusion{
		{Name: "a", Start: at(0), End: at(10 * day), Scope: ScopeNoMinorUpgrades},
		{Name: "b", Start: at(5 * day), End: at(15 * day)},
		{Name: "c", Start: at(15 * day), End: at(20 * day), Scope: ScopeNoMinorOrNodeUpgrades},
	}})
	tests := []struct {
		name string
		ch   Change
		at   time.Time
		by   []string
		next time.Time
	}{
		{"only a, patch", cpPatch, at(day), nil, at(day)},
		{"only a, minor", cpMinor, at(day), []string{"a"}, at(20 * day)},
		{"a and b, patch", cpPatch, at(6 * day), []string{"b"}, at(15 * day)},
		{"a and b, minor", cpMinor, at(6 * day), []string{"a", "b"}, at(20 * day)},
		{"touching b then c, nodes", ndPatch, at(6 * day), []string{"b"}, at(20 * day)},
		{"c, CP patch", cpPatch, at(16 * day), nil, at(16 * day)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := c.Allowed(tc.ch, tc.at)
			require.Equal(t, tc.by, d.BlockedBy)
			require.Equal(t, tc.by == nil, d.Allowed)
			next, ok := c.NextOpportunity(tc.ch, tc.at)
			require.True(t, ok)
			require.Equal(t, tc.next, next)
		})
	}
}

func TestExpiredExclusionsStopMattering(t *testing.T) {
	p := Policy{Exclusions: []Exclusion{{Name: "old", Start: at(-10 * day), End: at(-day)}}}
	c := mustCompile(t, p)
	require.Equal(t, Decision{Allowed: true}, c.Allowed(cpMinor, at(0)))
	require.NoError(t, p.Validate(ValidationContext{Now: at(0)}))
	// Expired no_upgrades exclusions do not count towards the limit of three.
	for i, name := range []string{"n1", "n2", "n3"} {
		p.Exclusions = append(p.Exclusions, Exclusion{Name: name, Start: at(time.Duration(i) * 5 * day), End: at(time.Duration(i)*5*day + day)})
	}
	require.NoError(t, p.Validate(ValidationContext{Now: at(0)}))
}

func TestOneOffWindow(t *testing.T) {
	c := mustCompile(t, Policy{Window: &Window{Start: at(day), End: at(2 * day)}})
	require.False(t, c.Allowed(cpPatch, at(0)).Allowed)
	require.Equal(t, Decision{Allowed: true, WindowEnds: at(2 * day)}, c.Allowed(cpPatch, at(day)))
	next, ok := c.NextOpportunity(cpPatch, at(0))
	require.True(t, ok)
	require.Equal(t, at(day), next)
	_, ok = c.NextOpportunity(cpPatch, at(2*day))
	require.False(t, ok, "a one-off window never reopens")
}

func TestWindowEndsMergesTouchingOccurrences(t *testing.T) {
	// Daily 00:00–24:00 is always open: one stretch, capped at the horizon.
	c := mustCompile(t, Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "FREQ=DAILY"}})
	d := c.Allowed(cpPatch, at(3*day))
	require.True(t, d.Allowed)
	require.Equal(t, at(3*day+WindowEndsHorizon), d.WindowEnds)
	// Daily until the 10th occurrence: the stretch ends with it.
	c = mustCompile(t, Policy{Window: &Window{Start: at(0), End: at(day), Recurrence: "FREQ=DAILY;COUNT=10"}})
	require.Equal(t, at(10*day), c.Allowed(cpPatch, at(3*day)).WindowEnds)
	require.False(t, c.Allowed(cpPatch, at(10*day)).Allowed)
}

func TestPolicyConvenienceFailsClosed(t *testing.T) {
	bad := Policy{Window: &Window{Start: at(0), End: at(time.Hour), Recurrence: "FREQ=HOURLY"}}
	require.Equal(t, Decision{BlockedBy: []string{"window"}, PauseReason: PauseMaintenanceWindow}, bad.Allowed(cpPatch, at(0)))
	_, ok := bad.NextOpportunity(cpPatch, at(0))
	require.False(t, ok)
	good := Policy{}
	require.True(t, good.Allowed(cpPatch, at(0)).Allowed)
	next, ok := good.NextOpportunity(cpPatch, at(0))
	require.True(t, ok)
	require.Equal(t, at(0), next)
}
