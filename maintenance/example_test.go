package maintenance_test

import (
	"fmt"
	"time"

	"github.com/moltproject/molt/maintenance"
)

func Example() {
	p := maintenance.Policy{
		Window: &maintenance.Window{
			Start:      time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC), // a Saturday
			End:        time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC),
			Recurrence: "FREQ=WEEKLY;BYDAY=SA,SU",
		},
		Exclusions: []maintenance.Exclusion{{
			Name:  "launch",
			Start: time.Date(2026, 1, 17, 0, 0, 0, 0, time.UTC),
			End:   time.Date(2026, 1, 19, 0, 0, 0, 0, time.UTC),
		}},
	}
	if err := p.Validate(maintenance.ValidationContext{Now: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)}); err != nil {
		fmt.Println(err)
		return
	}
	c, _ := p.Compile()
	patch := maintenance.Change{Target: maintenance.TargetNodes, Kind: maintenance.KindPatch}
	now := time.Date(2026, 1, 17, 3, 0, 0, 0, time.UTC)
	d := c.Allowed(patch, now)
	fmt.Println(d.Allowed, d.BlockedBy, d.PauseReason)
	next, _ := c.NextOpportunity(patch, now)
	fmt.Println(next)
	// Output:
	// false [launch] MAINTENANCE_EXCLUSION_NO_UPGRADES
	// 2026-01-24 00:00:00 +0000 UTC
}
