package schedule

import "time"

// The registration hold. A cluster registered on a release channel whose
// target is ahead of it would otherwise be started on by the next pass,
// milliseconds after the request, before its operator could have stored
// a maintenance policy. A registration that carries no policy therefore
// holds automatic upgrades until State.HeldUntil (the registering member
// sets it from its configured hold); storing any policy — an empty one,
// "any time", included — ends the hold at once. Upgrades an operator
// requests are not held, and neither is an upgrade already in progress.

// Held reports whether s holds automatic upgrades at now.
func Held(s State, now time.Time) bool { return now.Before(s.HeldUntil) }

func holdBlock(until time.Time) Block {
	return Block{Kind: BlockRule, Name: RuleRegistrationHold, Until: until,
		Detail: "registered without a maintenance policy; automatic upgrades wait for one to be stored, or for the hold to end"}
}
