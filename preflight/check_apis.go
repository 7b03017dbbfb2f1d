package preflight

import (
	"fmt"
	"strconv"
	"strings"
)

// deprecatedAPIsSeverity: blocking before an automatic minor upgrade (SPEC
// §14: nobody is there to read a warning), a warning otherwise.
func deprecatedAPIsSeverity(in Input) Severity {
	if in.Automatic && in.Target.Minor > in.Current.Minor {
		return Blocking
	}
	return Warning
}

// checkDeprecatedAPIs fails when a deprecated API that clients requested
// from the API server (its apiserver_requested_deprecated_apis metric,
// label removed_release) is no longer served by the target minor. The
// metric counts requests since the API server last started, so an API
// used rarely (a monthly job) may not show yet. A patch upgrade removes
// no API and passes without the data.
func checkDeprecatedAPIs(in Input) Result {
	switch {
	case in.Current.IsZero():
		return missing("the cluster's current version is unknown")
	case in.Target.IsZero():
		return missing("no target version")
	}
	if in.Target.Minor <= in.Current.Minor {
		return pass("a patch upgrade removes no API", nil)
	}
	if g := in.gap(SourceDeprecatedAPIs); g != "" {
		return missing(g)
	}
	data := map[string]string{}
	var removed []string
	for _, a := range in.DeprecatedAPIs {
		if !removedBy(a.RemovedRelease, in.Target.Major, in.Target.Minor) {
			continue
		}
		key := a.String()
		if _, dup := data[key]; !dup {
			removed = append(removed, key)
		}
		data[key] = "removed in " + a.RemovedRelease
	}
	if len(removed) == 0 {
		if len(in.DeprecatedAPIs) == 0 {
			return pass("no deprecated API has been requested", nil)
		}
		return pass(fmt.Sprintf("%d deprecated API(s) in use, none removed in %s", len(in.DeprecatedAPIs), in.Target.MinorString()), nil)
	}
	return fail(fmt.Sprintf("%s in use, removed in %s: %s; move their clients to the replacement APIs first",
		plural(len(removed), "deprecated API is", "deprecated APIs are"), in.Target.MinorString(), nameList(removed)), data)
}

// removedBy reports whether an API removed in release ("1.37") is gone in
// major.minor.
func removedBy(release string, major, minor int) bool {
	maj, min, ok := strings.Cut(release, ".")
	if !ok {
		return false
	}
	a, errA := strconv.Atoi(maj)
	b, errB := strconv.Atoi(min)
	if errA != nil || errB != nil {
		return false
	}
	return a < major || a == major && b <= minor
}
