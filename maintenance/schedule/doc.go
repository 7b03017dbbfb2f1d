// Package schedule is the pure decision of automatic upgrades (SPEC §14):
// given the fleet's replicated state and an instant, which clusters start
// an automatic upgrade now, to which version and why, and — for every
// cluster — why it is or is not upgrading.
//
// The coordinator's leader runs Evaluate on a timer and after every change
// of the catalog, a channel, a policy or a cluster, and proposes each
// decision as a Raft command; the state machine runs EvaluateCluster again
// on the state the command lands on and refuses a decision that no longer
// holds (a stale decision), so a new leader never starts an upgrade twice.
// GET /v1/clusters/{name}/upgrade-status serves the Status of the same
// evaluation.
//
// The rules, in the order they are applied to a cluster:
//
//   - an upgrade in progress is reported (running, or paused at a window's
//     end) and nothing else starts;
//   - a minor past its end of support is left for the next minor, on any
//     channel or none (endofsupport.go), forced through windows,
//     exclusions and the catch-up pace;
//   - otherwise a cluster on no release channel is manual only, and one at
//     its channel's target is up to date (both say what their end of
//     support will force, and when);
//   - the outcome of the last automatic attempt is recorded first (backoff
//     after a failure, exponential from BackoffBase, capped at BackoffMax);
//   - the next step towards the channel's auto-upgrade target: the newest
//     patch of the current minor first, then the next minor (never two at
//     once), at most one minor per maintenance.CatchUpInterval while the
//     cluster is more than one minor behind its channel;
//   - a cluster of a rollout sequence waits for the stages before its
//     own to be done with the step's version (sequence.go), unless an
//     end of support forces the step, which then says it bypassed the
//     sequence;
//   - a cluster registered without a maintenance policy waits out its
//     registration hold (State.HeldUntil), even past its end of support
//     (hold.go);
//   - the version rules and the admin/user skew of SPEC §3;
//   - the maintenance window and the exclusions that cover the change
//     (package maintenance), except for a minor past its end of support,
//     which is forced through them;
//   - at most Limits.PerFamily upgrades at once in a family (an admin
//     cluster and the user clusters it manages), at most Limits.Fleet in
//     the fleet; the admin cluster of a family is considered first.
//
// The backoff, the pace, the rules, the policy and the limits are the
// blockers of blockers.go: each that applies is reported with its own
// end, not only the first.
//
// Everything here is pure: no I/O, no clock, no logging.
package schedule
