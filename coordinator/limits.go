package coordinator

import (
	"fmt"

	"github.com/moltproject/molt/api"
)

// Bounds of request bodies that are not cluster specs or upgrade options
// (those are phases.Admit's and phases.CheckOptions'). Each is checked
// before anything is proposed; docs/api.md lists them.
const (
	// MaxReleaseChannels, MaxReleaseImages, MaxReleaseAddons and
	// MaxReleaseStaticPods bound a release catalog entry's lists.
	MaxReleaseChannels   = 16
	MaxReleaseImages     = 256
	MaxReleaseAddons     = 256
	MaxReleaseStaticPods = 256
	// MaxAgentStringLen bounds what an agent reports that is stored:
	// component versions and its probe address.
	MaxAgentStringLen = 253
	// MaxHeartbeatItems bounds a heartbeat's static pods and disks.
	MaxHeartbeatItems = 256
	// MaxResultMessageLen and MaxResultDetails bound an operation result.
	MaxResultMessageLen = 64 << 10
	MaxResultDetails    = 256
)

func limitErr(rule, format string, args ...any) error {
	return &RuleError{Rule: rule, Detail: fmt.Sprintf(format, args...), Err: ErrInvalid}
}

func checkReleaseLimits(r api.Release) error {
	c := r.Components
	switch {
	case len(r.Channels) > MaxReleaseChannels:
		return limitErr("release-limits", "%d channels; at most %d", len(r.Channels), MaxReleaseChannels)
	case len(c.Images) > MaxReleaseImages:
		return limitErr("release-limits", "%d image archives; at most %d", len(c.Images), MaxReleaseImages)
	case len(c.Addons) > MaxReleaseAddons:
		return limitErr("release-limits", "%d add-ons; at most %d", len(c.Addons), MaxReleaseAddons)
	case len(c.StaticPods) > MaxReleaseStaticPods:
		return limitErr("release-limits", "%d static pods; at most %d", len(c.StaticPods), MaxReleaseStaticPods)
	}
	return nil
}

func checkHeartbeatLimits(h api.AgentHealth) error {
	for _, s := range []string{h.AgentVersion, h.Kubelet.Version, h.Containerd.Version} {
		if len(s) > MaxAgentStringLen {
			return limitErr("agent-health", "a version is %d bytes; at most %d", len(s), MaxAgentStringLen)
		}
	}
	if len(h.StaticPods) > MaxHeartbeatItems || len(h.Disk) > MaxHeartbeatItems {
		return limitErr("agent-health", "at most %d static pods and %d disks", MaxHeartbeatItems, MaxHeartbeatItems)
	}
	return nil
}

func checkResultLimits(r api.OperationResult) error {
	if len(r.Message) > MaxResultMessageLen || len(r.Details) > MaxResultDetails {
		return limitErr("operation-result", "message at most %d bytes, at most %d details", MaxResultMessageLen, MaxResultDetails)
	}
	return nil
}
