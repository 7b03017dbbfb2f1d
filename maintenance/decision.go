package maintenance

import "time"

// PauseReason says why an automatic change waits, in GKE's vocabulary, so
// dashboards and alerts can use one set of strings.
type PauseReason string

// Pause reasons. An exclusion's reason wins over the window's.
const (
	PauseNone                           PauseReason = ""
	PauseMaintenanceWindow              PauseReason = "MAINTENANCE_WINDOW"
	PauseExclusionNoUpgrades            PauseReason = "MAINTENANCE_EXCLUSION_NO_UPGRADES"
	PauseExclusionNoMinorUpgrades       PauseReason = "MAINTENANCE_EXCLUSION_NO_MINOR_UPGRADES"
	PauseExclusionNoMinorOrNodeUpgrades PauseReason = "MAINTENANCE_EXCLUSION_NO_MINOR_OR_NODE_UPGRADES"
)

// BlockedByWindow is the BlockedBy entry for "outside the window"; no
// exclusion may use it as a name.
const BlockedByWindow = "window"

// Decision is the answer to "may this change run at this instant?".
type Decision struct {
	// Allowed is true when the window is open and no exclusion covering
	// the change is active.
	Allowed bool
	// BlockedBy lists the active exclusions that cover the change, in
	// policy order, then BlockedByWindow when outside the window.
	BlockedBy []string
	// PauseReason is empty when Allowed; otherwise the broadest blocking
	// exclusion's reason, else PauseMaintenanceWindow.
	PauseReason PauseReason
	// WindowEnds is when the open stretch of the window that contains the
	// instant closes (overlapping or touching occurrences count as one
	// stretch), capped at instant+WindowEndsHorizon. Zero when there is no
	// window or the instant is outside it.
	WindowEnds time.Time
}

func scopeReason(s Scope) PauseReason {
	switch s {
	case ScopeNoMinorUpgrades:
		return PauseExclusionNoMinorUpgrades
	case ScopeNoMinorOrNodeUpgrades:
		return PauseExclusionNoMinorOrNodeUpgrades
	default:
		return PauseExclusionNoUpgrades
	}
}
