package kube

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"
)

// Defaults from SPEC §6 and §8. Each is a setting (Config), these are the
// values molt ships with.
const (
	// DefaultDrainTimeout is how long a bare-metal node's drain waits
	// before the upgrade goes on with pods left behind (SPEC §6, ref). It is
	// also the most Config.DrainTimeout may be (MaxDrainTimeout).
	DefaultDrainTimeout = 20 * time.Minute
	// MaxDrainTimeout caps Config.DrainTimeout: "at most 20 minutes" is
	// the rule of GKE on Bare Metal, a setting that may shorten the wait,
	// never lengthen it.
	MaxDrainTimeout = 20 * time.Minute
	// DefaultSurgeDrainTimeout is how long the drain of a MIG surge pool's
	// node honours PodDisruptionBudgets and grace periods before the
	// upgrade goes on (SPEC §7: "drain old (≤ 1 h)", as GKE's surge
	// upgrades): an hour, not the 20 minutes of a bare-metal node.
	DefaultSurgeDrainTimeout = time.Hour
	// MaxSurgeDrainTimeout caps Config.SurgeDrainTimeout.
	MaxSurgeDrainTimeout = time.Hour
	// DefaultMaxGracePeriod caps each pod's termination grace period during
	// a node upgrade (SPEC §6, §8: node upgrade grace is 1 hour).
	DefaultMaxGracePeriod = time.Hour
	// MaxMaxGracePeriod caps Config.MaxGracePeriod (SPEC §6: "never more
	// than 1 hour").
	MaxMaxGracePeriod = time.Hour
	// DefaultProtectionAge is how long a safe-to-evict=false pod is shielded
	// from automatic upgrades (SPEC §8: 7 days, image pull time counts).
	DefaultProtectionAge = 7 * 24 * time.Hour
	// DefaultEvictionBackoff is the wait between eviction attempts of a pod
	// that a PodDisruptionBudget refused; kubectl drain uses the same 5 s.
	DefaultEvictionBackoff = 5 * time.Second
	// DefaultPollInterval is how often drains and readiness waits re-read
	// the API server.
	DefaultPollInterval = 2 * time.Second
)

// Annotations molt reads or writes.
const (
	// AnnotationScaleDownDisabled keeps the cluster autoscaler from removing
	// a node under upgrade (SPEC §6, §10).
	AnnotationScaleDownDisabled = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	// AnnotationSafeToEvict set to "false" protects a pod from automatic
	// upgrades for ProtectionAge (SPEC §8).
	AnnotationSafeToEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	// AnnotationScaleDownDisabledByMolt records that molt, not an operator,
	// set AnnotationScaleDownDisabled, so Uncordon removes only what molt
	// added.
	AnnotationScaleDownDisabledByMolt = "molt.dev/scale-down-disabled-by-molt"
)

// Sentinel errors; callers match them with errors.Is.
var (
	// ErrNodeNotFound means the named Node object does not exist.
	ErrNodeNotFound = errors.New("kube: node not found")
	// ErrAPI wraps a failed Kubernetes API call.
	ErrAPI = errors.New("kube: api call failed")
	// ErrConfig means a Config or kubeconfig is unusable.
	ErrConfig = errors.New("kube: invalid config")
	// ErrManifest means a manifest does not decode into a known kind, or
	// has fields its kind does not have.
	ErrManifest = errors.New("kube: invalid manifest")
)

// Config holds the settings of a Client. Start from DefaultConfig.
type Config struct {
	// DrainTimeout bounds a bare-metal node's drain (DrainNode); after it
	// Drain returns with TimedOut and the pods left behind, not with an
	// error. At most MaxDrainTimeout (Validate).
	DrainTimeout time.Duration
	// SurgeDrainTimeout bounds the drain of a MIG surge pool's node
	// (DrainSurge). At most MaxSurgeDrainTimeout (Validate).
	SurgeDrainTimeout time.Duration
	// MaxGracePeriod caps each evicted pod's termination grace period. At
	// most MaxMaxGracePeriod (Validate).
	MaxGracePeriod time.Duration
	// ProtectionAge is how long after start a safe-to-evict=false pod is
	// left alone by automatic drains.
	ProtectionAge time.Duration
	// EvictionBackoff is the wait before retrying an eviction refused with
	// 429 (PodDisruptionBudget).
	EvictionBackoff time.Duration
	// PollInterval is how often drains and WaitNodeReady re-read state.
	PollInterval time.Duration
	// Clock is the only source of time; tests pass a fake clock.
	Clock clock.WithTicker
	// Logger receives progress; nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns the shipped settings with the real clock.
func DefaultConfig() Config {
	return Config{
		DrainTimeout:      DefaultDrainTimeout,
		SurgeDrainTimeout: DefaultSurgeDrainTimeout,
		MaxGracePeriod:    DefaultMaxGracePeriod,
		ProtectionAge:     DefaultProtectionAge,
		EvictionBackoff:   DefaultEvictionBackoff,
		PollInterval:      DefaultPollInterval,
		Clock:             clock.RealClock{},
		Logger:            slog.New(slog.DiscardHandler),
	}
}

// withDefaults fills zero fields so a partly filled Config still works.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = d.DrainTimeout
	}
	if c.SurgeDrainTimeout <= 0 {
		c.SurgeDrainTimeout = d.SurgeDrainTimeout
	}
	if c.MaxGracePeriod <= 0 {
		c.MaxGracePeriod = d.MaxGracePeriod
	}
	if c.ProtectionAge <= 0 {
		c.ProtectionAge = d.ProtectionAge
	}
	if c.EvictionBackoff <= 0 {
		c.EvictionBackoff = d.EvictionBackoff
	}
	if c.PollInterval <= 0 {
		c.PollInterval = d.PollInterval
	}
	if c.Clock == nil {
		c.Clock = d.Clock
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// Validate refuses settings past the caps of SPEC §6 and §7, naming the
// rule each breaks: a drain timeout is a setting that may shorten the
// wait, never lengthen it. Zero values stand for the defaults.
// NewFromKubeconfig checks it; the coordinator refuses to start with such
// flags.
func (c Config) Validate() error {
	for _, lim := range []struct {
		rule, setting string
		got, max      time.Duration
	}{
		{"drain-timeout-max", "drain timeout of a bare-metal node", c.DrainTimeout, MaxDrainTimeout},
		{"surge-drain-timeout-max", "drain timeout of a MIG surge node", c.SurgeDrainTimeout, MaxSurgeDrainTimeout},
		{"max-grace-period-max", "grace period cap", c.MaxGracePeriod, MaxMaxGracePeriod},
	} {
		if lim.got > lim.max {
			return fmt.Errorf("%w: %s: the %s is %s, at most %s", ErrConfig, lim.rule, lim.setting, lim.got, lim.max)
		}
	}
	return nil
}
