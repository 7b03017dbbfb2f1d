package kube

import (
	"errors"
	"log/slog"
	"time"

	"k8s.io/utils/clock"
)

// Defaults from SPEC §6 and §8. Each is a setting (Config), these are the
// values molt ships with.
const (
	// DefaultDrainTimeout is how long a drain waits before the upgrade goes
	// on with pods left behind (SPEC §6, ref).
	DefaultDrainTimeout = 20 * time.Minute
	// DefaultMaxGracePeriod caps each pod's termination grace period during
	// a node upgrade (SPEC §6, §8: node upgrade grace is 1 hour).
	DefaultMaxGracePeriod = time.Hour
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
	// DrainTimeout bounds a drain; after it Drain returns with TimedOut and
	// the pods left behind, not with an error.
	DrainTimeout time.Duration
	// MaxGracePeriod caps each evicted pod's termination grace period.
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
		DrainTimeout:    DefaultDrainTimeout,
		MaxGracePeriod:  DefaultMaxGracePeriod,
		ProtectionAge:   DefaultProtectionAge,
		EvictionBackoff: DefaultEvictionBackoff,
		PollInterval:    DefaultPollInterval,
		Clock:           clock.RealClock{},
		Logger:          slog.New(slog.DiscardHandler),
	}
}

// withDefaults fills zero fields so a partly filled Config still works.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = d.DrainTimeout
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
