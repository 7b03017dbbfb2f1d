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

// MaintenancePolicyToAPI writes a maintenance policy for the wire: the
// same fields under the same JSON names, so GET returns what PUT took.
func MaintenancePolicyToAPI(p maintenance.Policy) api.MaintenancePolicy {
	return api.MaintenancePolicy{
		Window: conv.Ptr(p.Window, func(w maintenance.Window) api.MaintenanceWindow {
			return api.MaintenanceWindow{Start: w.Start, End: w.End, Recurrence: w.Recurrence}
		}),
		Exclusions: conv.Slice(p.Exclusions, func(e maintenance.Exclusion) api.MaintenanceExclusion {
			return api.MaintenanceExclusion{Name: e.Name, Start: e.Start, End: e.End, Scope: string(e.Scope)}
		}),
	}
}
