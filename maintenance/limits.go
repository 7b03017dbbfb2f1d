package maintenance

import "time"

// Limits from SPEC §9 (GKE's numbers) and the bounds this package chose
// where SPEC is silent; docs/maintenance.md explains each one.
const (
	// MaxExclusions is the number of exclusions a policy may hold,
	// expired ones included, so the size of a policy stays bounded.
	MaxExclusions = 20
	// MaxNoUpgradesExclusions bounds the no_upgrades exclusions that have
	// not yet ended at validation time.
	MaxNoUpgradesExclusions = 3
	// MinAvailability is the maintenance availability every
	// AvailabilityPeriod must keep.
	MinAvailability = 48 * time.Hour
	// AvailabilityPeriod is the sliding period MinAvailability applies to.
	AvailabilityPeriod = 32 * 24 * time.Hour
	// MinAvailabilityStretch is the shortest contiguous opening that counts
	// towards MinAvailability; shorter gaps are too small for an upgrade.
	MinAvailabilityStretch = 4 * time.Hour
	// AvailabilityLookahead is how far past validation time the
	// availability rule checks the window's own rhythm (periods touched by
	// a no_upgrades exclusion are checked wherever they are); a year covers
	// every daily, weekly and monthly rhythm.
	AvailabilityLookahead = 365 * 24 * time.Hour
	// SearchHorizon bounds NextOpportunity.
	SearchHorizon = 2 * 365 * 24 * time.Hour
	// WindowEndsHorizon caps Decision.WindowEnds for windows whose open
	// stretch goes on and on (a daily 24 h window). The coordinator asks
	// again before every step, and a week is far longer than any step, so
	// a longer look-ahead would only cost time.
	WindowEndsHorizon = 7 * 24 * time.Hour
	// MaxRecurrenceCount bounds an RRULE COUNT; it is turned into an UNTIL
	// once, when the policy is compiled.
	MaxRecurrenceCount = 10000
	// MaxRecurrenceInterval bounds an RRULE INTERVAL.
	MaxRecurrenceInterval = 366
	// MaxStartsPerDay bounds the BYHOUR×BYMINUTE×BYSECOND start times a
	// recurrence may give one day, in the spirit of refusing HOURLY.
	MaxStartsPerDay = 24
	// CatchUpInterval is the pace of catch-up minor upgrades: one a month.
	CatchUpInterval = 30 * 24 * time.Hour
)

// Instants outside [minTime, maxTime) are refused: they are typos, and the
// bound keeps every duration this package computes inside time.Duration.
var (
	minTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)
