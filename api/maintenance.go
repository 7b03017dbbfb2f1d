package api

import "time"

// MaintenancePolicy is a cluster's maintenance policy (SPEC §9,
// docs/maintenance.md): what PUT and GET
// /v1/clusters/{name}/maintenance-policy carry, and what a cluster's
// registration may carry (ClusterSpec.MaintenancePolicy). No window means
// always open; the zero policy lets automatic upgrades run at any time.
type MaintenancePolicy struct {
	Window     *MaintenanceWindow     `json:"window,omitempty"`
	Exclusions []MaintenanceExclusion `json:"exclusions,omitempty"`
}

// MaintenanceWindow is the first occurrence of a recurring window and its
// RFC 5545 RRULE (empty: a one-off window). Any offset is accepted; the
// coordinator stores UTC.
type MaintenanceWindow struct {
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	Recurrence string    `json:"recurrence"`
}

// MaintenanceExclusion blocks the changes its scope covers during
// [start, end): no_upgrades (empty), no_minor_upgrades or
// no_minor_or_node_upgrades.
type MaintenanceExclusion struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Scope string    `json:"scope,omitempty"`
}
