package schedule

import (
	"fmt"
	"time"

	"github.com/moltproject/molt/phases"
)

// End of support. Every cluster is moved off a minor past its end of
// support, as GKE does, whatever its channel: a cluster on no channel, or
// on a channel whose target has not left that minor, is forced too, not
// only a cluster whose channel leads elsewhere. The forced step is always
// the next minor (a minor is never skipped, SPEC §3): the newest release
// of it at most the channel's target when the target is on it or beyond,
// else the catalog's newest release of it. A cluster several minors
// behind climbs one forced minor after another until it runs a supported
// minor, so it ends on the oldest supported minor's newest release (or
// the channel's choice on it).

// eosStep is the step that moves c off its current minor once that minor
// is past its end of support: the next minor's newest release at most
// target when target is on that minor or beyond (target zero: no
// channel), else the next minor's newest release. ok is false when the
// catalog has no release of the next minor.
func (e *evaluator) eosStep(c *Cluster, target phases.Version) (phases.Version, bool) {
	cur := c.Current
	bounded := !target.IsZero() && target.Major == cur.Major && target.Minor > cur.Minor
	var best phases.Version
	for _, v := range e.f.Catalog.Versions {
		if v.Major != cur.Major || v.Minor != cur.Minor+1 || (bounded && target.Less(v)) {
			continue
		}
		if best.Less(v) {
			best = v
		}
	}
	return best, !best.IsZero()
}

// pastEndOfSupport reports whether c's current minor has passed its end
// of support at now, with the date (zero: unknown).
func (e *evaluator) pastEndOfSupport(c *Cluster) (time.Time, bool) {
	eos := e.f.Catalog.EndOfSupport[c.Current.Minor]
	return eos, !eos.IsZero() && !e.now.Before(eos)
}

// idleUntilEndOfSupport completes the status of a cluster that has no
// step to take now (manual only, or at its channel's target): what its end
// of support will do, and when. Past it with no release to move to, the
// cluster is blocked (RuleNoRelease): nothing can be forced.
func (e *evaluator) idleUntilEndOfSupport(d *Decision, c *Cluster) {
	st := &d.Status
	eos, past := e.pastEndOfSupport(c)
	if eos.IsZero() {
		return
	}
	next, ok := e.eosStep(c, st.Target)
	minor := c.Current.MinorString()
	switch {
	case past && !ok:
		base := st.Message
		e.block(d, StateBlockedByRule, Block{Kind: BlockRule, Name: RuleNoRelease,
			Detail: fmt.Sprintf("%s is past its end of support (%s) and the catalog has no release of %d.%d to move it to",
				minor, eos.Format(time.RFC3339), c.Current.Major, c.Current.Minor+1)})
		st.Message = base + "; " + st.Message
	case !ok:
		st.Message += fmt.Sprintf("; %s reaches its end of support on %s, and the catalog has no release of %d.%d yet to move it to",
			minor, eos.Format(time.RFC3339), c.Current.Major, c.Current.Minor+1)
		d.wake(eos)
	default:
		// Not past it (past it with a release, decide forces the step);
		// a backoff that outlasts it still holds the step.
		at := eos
		if d.State.NextAttempt.After(at) {
			at = d.State.NextAttempt
		}
		st.Next, st.NextOpportunity, st.Forced = next, at, true
		st.Message += fmt.Sprintf("; %s reaches its end of support on %s: then it is upgraded automatically to %s, through maintenance windows and exclusions",
			minor, eos.Format(time.RFC3339), next)
		d.wake(eos)
	}
}

// eosReason is the audit sentence of a start forced by an end of support.
func eosReason(c *Cluster, ch Channel, next phases.Version, eos time.Time) string {
	why := "not on a release channel"
	switch {
	case Subscribed(c.Channel) && ch.Target.IsZero():
		why = fmt.Sprintf("channel %s has no auto-upgrade target", c.Channel)
	case Subscribed(c.Channel):
		why = fmt.Sprintf("channel %s targets %s", c.Channel, ch.Target)
	}
	return fmt.Sprintf("end of support: %s reached its end of support on %s; automatic minor upgrade %s → %s forced through maintenance windows and exclusions (%s)",
		c.Current.MinorString(), eos.Format(time.RFC3339), c.Current, next, why)
}
