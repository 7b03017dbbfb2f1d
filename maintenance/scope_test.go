package maintenance

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestScopeTable(t *testing.T) {
	const B, A = true, false // blocked, allowed
	// Columns: CP minor, CP patch, CP disruption, nodes minor, nodes patch, nodes disruption.
	table := map[Scope][6]bool{
		ScopeNoUpgrades:            {B, B, B, B, B, B},
		ScopeNoMinorUpgrades:       {B, A, A, B, A, A},
		ScopeNoMinorOrNodeUpgrades: {B, A, A, B, B, B},
	}
	reason := map[Scope]PauseReason{
		ScopeNoUpgrades:            PauseExclusionNoUpgrades,
		ScopeNoMinorUpgrades:       PauseExclusionNoMinorUpgrades,
		ScopeNoMinorOrNodeUpgrades: PauseExclusionNoMinorOrNodeUpgrades,
	}
	for scope, row := range table {
		p := Policy{Exclusions: []Exclusion{{Name: "x", Start: at(day), End: at(2 * day), Scope: scope}}}
		c := mustCompile(t, p)
		for i, ch := range allChanges() {
			t.Run(fmt.Sprintf("%s/%s/%s", scope, ch.Target, ch.Kind), func(t *testing.T) {
				require.Equal(t, row[i], scope.Blocks(ch))
				inside := c.Allowed(ch, at(day+time.Hour))
				if row[i] {
					require.Equal(t, Decision{BlockedBy: []string{"x"}, PauseReason: reason[scope]}, inside)
				} else {
					require.Equal(t, Decision{Allowed: true}, inside)
				}
				// Outside the exclusion (before, and exactly at its end) every cell is allowed.
				require.Equal(t, Decision{Allowed: true}, c.Allowed(ch, at(day-time.Nanosecond)))
				require.Equal(t, Decision{Allowed: true}, c.Allowed(ch, at(2*day)))
				require.Equal(t, row[i], !c.Allowed(ch, at(day)).Allowed, "start is inclusive")
			})
		}
	}
}

func TestUnknownChangeFailsClosed(t *testing.T) {
	c := mustCompile(t, Policy{Exclusions: []Exclusion{{Name: "x", Start: at(0), End: at(day), Scope: ScopeNoMinorUpgrades}}})
	for _, ch := range []Change{{"", ""}, {TargetNodes, "reboot"}, {"etcd", KindPatch}} {
		require.False(t, c.Allowed(ch, at(time.Hour)).Allowed, "%v", ch)
		next, ok := c.NextOpportunity(ch, at(time.Hour))
		require.True(t, ok)
		require.Equal(t, at(day), next)
	}
}
