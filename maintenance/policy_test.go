package maintenance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNormalizeStoredForm: the stored form has every instant in UTC and
// every exclusion's scope spelled out.
func TestNormalizeStoredForm(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	p := Policy{
		Window: &Window{Start: time.Date(2026, 1, 10, 3, 0, 0, 0, cet), End: time.Date(2026, 1, 10, 9, 0, 0, 0, cet), Recurrence: "FREQ=WEEKLY;BYDAY=SA,SU"},
		Exclusions: []Exclusion{
			{Name: "freeze", Start: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 2, 5, 0, 0, 0, 0, time.UTC)},
			{Name: "minor", Start: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Scope: ScopeNoMinorUpgrades},
		},
	}
	require.Equal(t, Policy{
		Window: &Window{Start: time.Date(2026, 1, 10, 2, 0, 0, 0, time.UTC), End: time.Date(2026, 1, 10, 8, 0, 0, 0, time.UTC), Recurrence: "FREQ=WEEKLY;BYDAY=SA,SU"},
		Exclusions: []Exclusion{
			{Name: "freeze", Start: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 2, 5, 0, 0, 0, 0, time.UTC), Scope: ScopeNoUpgrades},
			{Name: "minor", Start: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Scope: ScopeNoMinorUpgrades},
		},
	}, Normalize(p))
	require.Equal(t, Policy{}, Normalize(Policy{}))
}

func TestNormalizeIsIdempotent(t *testing.T) {
	p := Policy{
		Window:     &Window{Start: time.Date(2026, 1, 1, 1, 2, 3, 456, time.FixedZone("X", -7200)), End: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), Recurrence: "RRULE:FREQ=DAILY"},
		Exclusions: []Exclusion{{Name: "a", Start: t0, End: t0.Add(day)}},
	}
	once := Normalize(p)
	require.Equal(t, once, Normalize(once))
}

func TestCompiledPolicyIsACopy(t *testing.T) {
	c := mustCompile(t, Policy{Window: &Window{Start: t0, End: t0.Add(day), Recurrence: "FREQ=DAILY"}, Exclusions: []Exclusion{{Name: "a", Start: t0, End: t0.Add(day)}}})
	got := c.Policy()
	got.Exclusions[0].End = t0.Add(100 * day)
	got.Window.End = t0.Add(time.Hour)
	require.Equal(t, t0.Add(day), c.Policy().Exclusions[0].End)
	require.Equal(t, t0.Add(day), c.Policy().Window.End)
	require.False(t, c.Allowed(cpPatch, t0.Add(2*time.Hour)).Allowed)
}
