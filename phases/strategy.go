package phases

import (
	"math"
	"time"
)

// MIG pool strategies (SPEC §7).
const (
	StrategySurge     = "surge"
	StrategyBlueGreen = "blueGreen"
)

// Surge defaults and bounds (GKE's): per zone, maxSurge new instances are
// made before old ones go and maxUnavailable old ones go down at once; at
// most 20 nodes of a zone are upgraded at once.
const (
	DefaultMaxSurge       = 1
	DefaultMaxUnavailable = 0
	MaxSurgeInFlight      = 20
)

// Blue/green defaults and bounds (GKE's).
const (
	// DefaultNodePoolSoak is how long the green pool soaks before blue is
	// deleted.
	DefaultNodePoolSoak = time.Hour
	// MaxTotalSoak caps node-pool soak plus every batch soak: once the
	// soaking reaches it, blue is deleted at once.
	MaxTotalSoak = 7 * 24 * time.Hour
	// DeleteBlueGracePeriod caps the grace period of pods deleted with the
	// blue pool (they are deleted, not evicted: PDBs do not hold them).
	DeleteBlueGracePeriod = time.Hour
)

// BlueGreenSettings are GKE's blueGreenSettings.
type BlueGreenSettings struct {
	// BatchNodeCount drains this many blue nodes per batch; BatchPercentage
	// (0–1) this share of the pool, rounded down, at least 1. At most one
	// is set; neither means one node per batch. Zero (either) skips the
	// draining phase: the pool goes from cordoned to soaking.
	BatchNodeCount  *int
	BatchPercentage *float64
	// BatchSoak is waited after each batch.
	BatchSoak time.Duration
	// NodePoolSoak is waited after the last batch (nil: DefaultNodePoolSoak).
	NodePoolSoak *time.Duration
}

// Strategy is the pool's MIG strategy ("" for bare-metal pools).
func (p *Pool) Strategy() string {
	if p.Backing != BackingMIG {
		return ""
	}
	if p.Settings.Strategy == "" {
		return StrategySurge
	}
	return p.Settings.Strategy
}

// SurgeBudget is the pool's per-zone maxSurge and maxUnavailable with
// their defaults.
func (s UpgradeSettings) SurgeBudget() (surge, unavailable int) {
	surge, unavailable = DefaultMaxSurge, DefaultMaxUnavailable
	if s.MaxSurge != nil {
		surge = *s.MaxSurge
	}
	if s.MaxUnavailable != nil {
		unavailable = *s.MaxUnavailable
	}
	return surge, unavailable
}

func (s UpgradeSettings) validateMIG(p *Pool) error {
	if s.ConcurrentNodes != 0 || s.MinimumAvailableNodes != 0 {
		return invalid("strategy", "pool %s: concurrentNodes and minimumAvailableNodes apply to bare-metal pools; mig pools use maxSurge/maxUnavailable or blueGreenSettings", p.Name)
	}
	if p.Strategy() == StrategyBlueGreen {
		if s.MaxSurge != nil || s.MaxUnavailable != nil {
			return invalid("strategy", "pool %s: maxSurge and maxUnavailable belong to the surge strategy", p.Name)
		}
		return s.BlueGreen.validate(p)
	}
	if s.BlueGreen != nil {
		return invalid("strategy", "pool %s: blueGreenSettings need strategy blueGreen", p.Name)
	}
	surge, unavailable := s.SurgeBudget()
	if surge < 0 || unavailable < 0 || surge+unavailable < 1 || surge+unavailable > MaxSurgeInFlight {
		return invalid("surge-budget", "pool %s: maxSurge %d + maxUnavailable %d must be 1..%d", p.Name, surge, unavailable, MaxSurgeInFlight)
	}
	return nil
}

func (b *BlueGreenSettings) validate(p *Pool) error {
	if b == nil {
		return nil
	}
	if b.BatchNodeCount != nil && b.BatchPercentage != nil {
		return invalid("blue-green-batch", "pool %s: set batchNodeCount or batchPercentage, not both", p.Name)
	}
	if b.BatchNodeCount != nil && (*b.BatchNodeCount < 0 || *b.BatchNodeCount > MaxClusterNodes) {
		return invalid("blue-green-batch", "pool %s: batchNodeCount %d is outside 0..%d", p.Name, *b.BatchNodeCount, MaxClusterNodes)
	}
	if f := b.BatchPercentage; f != nil && (math.IsNaN(*f) || *f < 0 || *f > 1) {
		return invalid("blue-green-batch", "pool %s: batchPercentage must be in 0..1", p.Name)
	}
	if b.BatchSoak < 0 || b.BatchSoak > MaxTotalSoak {
		return invalid("blue-green-soak", "pool %s: batchSoakDuration must be 0..%s", p.Name, MaxTotalSoak)
	}
	if d := b.NodePoolSoak; d != nil && (*d < 0 || *d > MaxTotalSoak) {
		return invalid("blue-green-soak", "pool %s: nodePoolSoakDuration must be 0..%s", p.Name, MaxTotalSoak)
	}
	return nil
}

// BatchSize is how many blue nodes of a pool of n drain per batch (0: the
// draining phase is skipped).
func (b *BlueGreenSettings) BatchSize(n int) int {
	switch {
	case b == nil || b.BatchNodeCount == nil && b.BatchPercentage == nil:
		return min(1, n)
	case b.BatchNodeCount != nil:
		return min(*b.BatchNodeCount, n)
	}
	if *b.BatchPercentage == 0 {
		return 0
	}
	// The epsilon keeps 0.29 × 100 at 29 despite binary rounding.
	return min(max(int(math.Floor(*b.BatchPercentage*float64(n)+1e-9)), 1), n)
}

// PoolSoak is the node-pool soak with its default.
func (b *BlueGreenSettings) PoolSoak() time.Duration {
	if b == nil || b.NodePoolSoak == nil {
		return DefaultNodePoolSoak
	}
	return *b.NodePoolSoak
}

// BatchSoakDuration is the soak after each batch.
func (b *BlueGreenSettings) BatchSoakDuration() time.Duration {
	if b == nil {
		return 0
	}
	return b.BatchSoak
}
