package preflight

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// checkArtifacts requires every host to have downloaded the release's
// artifacts and matched their sums, so that neither an unreachable mirror
// nor a wrong catalog sum is discovered halfway through the nodes.
func checkArtifacts(in Input) Result {
	if in.Release == nil {
		return missing(fmt.Sprintf("version %s is not in the release catalog, so there are no artifacts to verify", in.Target))
	}
	names := NodeNames(in.Cluster)
	if len(names) == 0 {
		return missing("the cluster spec lists no nodes")
	}
	bad := map[string]string{}
	var unreported []string
	for _, n := range names {
		h, ok := in.HostChecks[n]
		switch {
		case !ok || !h.ArtifactsChecked:
			unreported = append(unreported, n)
		case !h.ArtifactsOK:
			bad[n] = artifactFailure(h)
		}
	}
	return hostVerdict("artifacts", unreported, bad, len(names),
		fmt.Sprintf("all %s verified the artifacts of %s", plural(len(names), "host", "hosts"), in.Target))
}

func artifactFailure(h HostCheck) string {
	if len(h.FailedArtifacts) > 0 {
		keys := slices.Sorted(maps.Keys(h.FailedArtifacts))
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+": "+h.FailedArtifacts[k])
		}
		return strings.Join(parts, "; ")
	}
	if h.ArtifactsMessage != "" {
		return h.ArtifactsMessage
	}
	return "check failed without a reason"
}

// checkDiskSpace requires, on every filesystem each host reported, the
// larger of what the agent says it needs and the configured minimum.
func checkDiskSpace(in Input) Result {
	names := NodeNames(in.Cluster)
	if len(names) == 0 {
		return missing("the cluster spec lists no nodes")
	}
	floor := in.MinFreeBytes
	if floor == 0 {
		floor = DefaultMinFreeBytes
	}
	bad := map[string]string{}
	var unreported []string
	for _, n := range names {
		h, ok := in.HostChecks[n]
		if !ok || !h.ArtifactsChecked || len(h.FreeBytes) == 0 {
			unreported = append(unreported, n)
			continue
		}
		need := max(h.RequiredBytes, floor)
		var short []string
		for _, path := range slices.Sorted(maps.Keys(h.FreeBytes)) {
			if free := h.FreeBytes[path]; free < need {
				short = append(short, fmt.Sprintf("%s has %s free, needs %s", path, bytesString(free), bytesString(need)))
			}
		}
		if len(short) > 0 {
			bad[n] = strings.Join(short, "; ")
		}
	}
	return hostVerdict("free disk space", unreported, bad, len(names),
		fmt.Sprintf("all %s have at least %s free", plural(len(names), "host", "hosts"), bytesString(floor)))
}

// checkNetworkReachability requires that no host failed to reach an
// address it probed: the agents of its ProbeTargets (at most ProbeFanout
// peers, every agent probed by some other host) and the API endpoint when
// the coordinator gave one. A node that cannot reach the API server will
// not come back Ready after its kubelet restarts. Hosts are sampled, not
// all pairs: a broken link between two hosts that do not probe each other
// goes unseen, while a host cut off from the others is seen by its probers.
func checkNetworkReachability(in Input) Result {
	names := NodeNames(in.Cluster)
	if len(names) == 0 {
		return missing("the cluster spec lists no nodes")
	}
	bad := map[string]string{}
	var unreported []string
	for _, n := range names {
		h, ok := in.HostChecks[n]
		switch {
		case !ok || !h.PeersProbed:
			unreported = append(unreported, n)
		case len(h.Unreachable) > 0:
			bad[n] = "cannot reach " + describe(h.Unreachable)
		case h.ProbeMessage != "":
			bad[n] = h.ProbeMessage
		}
	}
	return hostVerdict("reachability probe", unreported, bad, len(names),
		fmt.Sprintf("all %s reached what they probed: up to %d peer agents each, chosen so that every agent is probed by another host, and the API endpoint when one was given",
			plural(len(names), "host", "hosts"), ProbeFanout))
}

// hostVerdict turns per-host findings into a result: hosts that reported
// nothing fail the check as surely as hosts that reported a problem.
func hostVerdict(what string, unreported []string, bad map[string]string, total int, okMsg string) Result {
	data := map[string]string{}
	for n, why := range bad {
		data[n] = why
	}
	for _, n := range unreported {
		data[n] = "no report"
	}
	var msgs []string
	if len(unreported) > 0 {
		msgs = append(msgs, fmt.Sprintf("no %s report from %s: %s", what, plural(len(unreported), "host", "hosts"), nameList(unreported)))
	}
	if len(bad) > 0 {
		msgs = append(msgs, fmt.Sprintf("%s of %d failed: %s", plural(len(bad), "host", "hosts"), total, describe(bad)))
	}
	if len(msgs) > 0 {
		return fail(strings.Join(msgs, "; "), data)
	}
	return pass(okMsg, nil)
}

// bytesString renders a size in binary units for messages.
func bytesString(b uint64) string {
	const unit = 1024
	if b < unit {
		return strconv.FormatUint(b, 10) + " B"
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
