package maintenance

import "time"

// CatchUp paces a cluster that has fallen more than one minor behind its
// release channel's default (typically because exclusions held it back):
// it is moved one minor at a time, at most one automatic minor upgrade per
// CatchUpInterval (30 days), until it is within one minor of the default.
//
// It returns the minor to upgrade to next (always current+1), whether that
// upgrade is due at now, and the instant it becomes due: one
// CatchUpInterval after lastAutoMinorUpgrade, or now when there was none
// (zero lastAutoMinorUpgrade). A cluster at most one minor behind is not
// catching up: the result is (current, false, zero) and the ordinary
// auto-upgrade path applies. Being due only makes the upgrade eligible;
// windows and exclusions still gate when it runs (ask NextOpportunity from
// dueAt).
func CatchUp(current, channelDefault int, lastAutoMinorUpgrade, now time.Time) (nextMinor int, due bool, dueAt time.Time) {
	if channelDefault-current <= 1 {
		return current, false, time.Time{}
	}
	dueAt = now.UTC()
	if !lastAutoMinorUpgrade.IsZero() {
		dueAt = lastAutoMinorUpgrade.UTC().Add(CatchUpInterval)
	}
	return current + 1, !now.Before(dueAt), dueAt
}
