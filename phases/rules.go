package phases

import (
	"errors"
	"fmt"
)

// Rule names. They are stable: the API returns them to clients and the
// problem types are derived from them.
const (
	RuleDowngrade  = "version-downgrade"
	RuleSame       = "version-same"
	RuleSkipMinor  = "version-skip-minor"
	RuleMajor      = "version-major"
	RuleAdminSkew  = "admin-skew"
	RuleUserAhead  = "user-ahead-of-admin"
	RuleUnknown    = "version-unknown"
	RuleInvalid    = "version-invalid"
	RuleNodesNewer = "kubelet-newer-than-control-plane"
	RuleMixedSkew  = "more-than-two-versions"
)

// Sentinel errors, one per rule, so callers can errors.Is on them.
var (
	ErrDowngrade  = errors.New("downgrade refused")
	ErrSame       = errors.New("already at that version")
	ErrSkipMinor  = errors.New("minor version skipped")
	ErrMajor      = errors.New("major version change")
	ErrAdminSkew  = errors.New("admin/user version skew")
	ErrUserAhead  = errors.New("user cluster ahead of its admin cluster")
	ErrNodesNewer = errors.New("kubelet newer than control plane")
	ErrMixedSkew  = errors.New("more than two versions in a cluster")
)

// RuleError is a refusal by a named version rule.
type RuleError struct {
	Rule   string
	Detail string
	err    error
}

func (e *RuleError) Error() string { return e.Rule + ": " + e.Detail }

// Unwrap returns the rule's sentinel error.
func (e *RuleError) Unwrap() error { return e.err }

func ruleErr(rule string, sentinel error, format string, args ...any) error {
	return &RuleError{Rule: rule, Detail: fmt.Sprintf(format, args...), err: sentinel}
}

// RuleOf returns the rule name of err, or "" when err is not a rule refusal.
func RuleOf(err error) string {
	var re *RuleError
	if errors.As(err, &re) {
		return re.Rule
	}
	return ""
}

// CheckUpgrade applies SPEC §3 rules 1–3 to an upgrade from → to: no
// downgrade, patch upgrades within a minor, minor upgrades by exactly one.
func CheckUpgrade(from, to Version) error {
	switch {
	case to.Major != from.Major:
		return ruleErr(RuleMajor, ErrMajor, "%s → %s changes the major version", from, to)
	case to.Less(from):
		return ruleErr(RuleDowngrade, ErrDowngrade, "%s → %s is a downgrade; downgrades are refused", from, to)
	case to == from:
		return ruleErr(RuleSame, ErrSame, "the cluster already runs %s", from)
	case to.Minor > from.Minor+1:
		return ruleErr(RuleSkipMinor, ErrSkipMinor,
			"%s → %s skips minor %d.%d; upgrade one minor at a time (first to %d.%d.x)",
			from, to, from.Major, from.Minor+1, from.Major, from.Minor+1)
	}
	return nil
}

// ClusterVersion names a cluster and the version it runs.
type ClusterVersion struct {
	Name    string
	Version Version
}

// CheckAdminUpgrade applies SPEC §3 rule 4 to an admin cluster going from
// → to: before it moves to a new minor, every user cluster it manages must
// already run the admin's current minor, so that afterwards the admin is at
// most one minor ahead of each.
func CheckAdminUpgrade(from, to Version, users []ClusterVersion) error {
	if to.Minor == from.Minor {
		return nil
	}
	for _, u := range users {
		if u.Version.Minor < from.Minor {
			return ruleErr(RuleAdminSkew, ErrAdminSkew,
				"user cluster %s runs %s; it must reach %s.x before its admin cluster goes to %s",
				u.Name, u.Version, from.MinorString(), to.MinorString())
		}
	}
	return nil
}

// CheckUserUpgrade refuses a user cluster upgrade that would take it past
// its admin cluster: the admin manages its lifecycle and must be at least as
// new (SPEC §3 rule 4 read from the user side).
func CheckUserUpgrade(to, admin Version) error {
	if admin.IsZero() {
		return nil
	}
	if admin.Less(to) {
		return ruleErr(RuleUserAhead, ErrUserAhead,
			"target %s is newer than the admin cluster's %s; upgrade the admin cluster first", to, admin)
	}
	return nil
}

// CheckNodeVersions applies SPEC §3 rule 5 to the versions the nodes of a
// cluster run: at most two distinct versions, and no kubelet newer than the
// control plane.
func CheckNodeVersions(controlPlane Version, nodes map[Version]int) error {
	if len(nodes) > 2 {
		return ruleErr(RuleMixedSkew, ErrMixedSkew, "nodes run %d versions; at most the old and the new are allowed", len(nodes))
	}
	for v, n := range nodes {
		if n > 0 && controlPlane.Less(v) {
			return ruleErr(RuleNodesNewer, ErrNodesNewer, "%d node(s) run %s, newer than the control plane's %s", n, v, controlPlane)
		}
	}
	return nil
}
