package convert

import (
	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/conv"
	"github.com/moltproject/molt/maintenance"
)

// MaintenancePolicyFromAPI reads a maintenance policy from the wire; nil
// stays nil. It judges nothing: maintenance.Policy.Validate does.
func MaintenancePolicyFromAPI(p *api.MaintenancePolicy) *maintenance.Policy {
	return conv.Ptr(p, func(p api.MaintenancePolicy) maintenance.Policy {
		return maintenance.Policy{
			Window: conv.Ptr(p.Window, func(w api.MaintenanceWindow) maintenance.Window {
				return maintenance.Window{Start: w.Start, End: w.End, Recurrence: w.Recurrence}
			}),
			Exclusions: conv.Slice(p.Exclusions, func(e api.MaintenanceExclusion) maintenance.Exclusion {
				return maintenance.Exclusion{Name: e.Name, Start: e.Start, End: e.End, Scope: maintenance.Scope(e.Scope)}
			}),
		}
	})
}
