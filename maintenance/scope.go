package maintenance

// Scope says which changes an exclusion blocks.
type Scope string

// The scopes of SPEC §9.
const (
	// ScopeNoUpgrades blocks every automatic change; it is the default.
	ScopeNoUpgrades Scope = "no_upgrades"
	// ScopeNoMinorUpgrades blocks minor upgrades only.
	ScopeNoMinorUpgrades Scope = "no_minor_upgrades"
	// ScopeNoMinorOrNodeUpgrades blocks minor upgrades and anything on nodes.
	ScopeNoMinorOrNodeUpgrades Scope = "no_minor_or_node_upgrades"
)

// Target is the part of a cluster a change touches.
type Target string

// Targets.
const (
	TargetControlPlane Target = "controlPlane"
	TargetNodes        Target = "nodes"
)

// ChangeKind is what a change does to its target.
type ChangeKind string

// Change kinds.
const (
	// KindMinor is an upgrade to the next minor version.
	KindMinor ChangeKind = "minor"
	// KindPatch is a patch upgrade inside the current minor.
	KindPatch ChangeKind = "patch"
	// KindDisruption is any other automatic disruption (node repair,
	// re-creation, configuration roll-out).
	KindDisruption ChangeKind = "disruption"
)

// Change is the automatic change the coordinator wants to make.
type Change struct {
	Target Target
	Kind   ChangeKind
}

// Known reports whether s is one of the three scopes (after defaulting).
func (s Scope) Known() bool {
	switch s {
	case ScopeNoUpgrades, ScopeNoMinorUpgrades, ScopeNoMinorOrNodeUpgrades:
		return true
	}
	return false
}

// Blocks reports whether an active exclusion with scope s blocks ch; it is
// the table of SPEC §9. An unknown scope, target or kind blocks: a policy
// this package does not understand must fail closed.
func (s Scope) Blocks(ch Change) bool {
	known := (ch.Target == TargetControlPlane || ch.Target == TargetNodes) &&
		(ch.Kind == KindMinor || ch.Kind == KindPatch || ch.Kind == KindDisruption)
	if !known {
		return true
	}
	switch s {
	case ScopeNoMinorUpgrades:
		return ch.Kind == KindMinor
	case ScopeNoMinorOrNodeUpgrades:
		return ch.Kind == KindMinor || ch.Target == TargetNodes
	default: // ScopeNoUpgrades, "" and anything unknown
		return true
	}
}

// restrictiveness orders scopes so that, when several exclusions block a
// change, the pause reason names the broadest one.
func (s Scope) restrictiveness() int {
	switch s {
	case ScopeNoMinorUpgrades:
		return 1
	case ScopeNoMinorOrNodeUpgrades:
		return 2
	default:
		return 3
	}
}
