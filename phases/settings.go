package phases

// Limits and defaults of bare-metal pool concurrency (GKE on Bare Metal's
// parallel upgrade settings, SPEC §6).
const (
	DefaultConcurrentNodes = 1
	MaxConcurrentNodes     = 20
)

// UpgradeSettings control how fast a pool is upgraded.
type UpgradeSettings struct {
	// ConcurrentNodes is how many nodes of a bare-metal pool are upgraded at
	// once (0 means the default, 1; at most 20). Control-plane pools always
	// go one node at a time whatever this says, to keep etcd quorum.
	ConcurrentNodes int
	// MinimumAvailableNodes is how many nodes of the pool must stay
	// schedulable (not cordoned for the upgrade) at all times.
	MinimumAvailableNodes int
	// Strategy selects the MIG strategy: "surge" (default) or "blueGreen".
	Strategy string
	// MaxSurge and MaxUnavailable are the surge strategy's per-zone budget.
	MaxSurge       *int
	MaxUnavailable *int
	// BlueGreen configures the blueGreen strategy (strategy.go).
	BlueGreen *BlueGreenSettings
	// MaxFailedNodes is the pool's failure budget (nil: 1): when that
	// many of its nodes failed, the pool fails (health.go).
	MaxFailedNodes *int
	// Rollback is what a pool past its budget does: RollbackManual (the
	// default), RollbackAuto, RollbackNever.
	Rollback string
	// HealthGates must hold after each node, besides the cluster's.
	HealthGates []HealthGate
}

// Validate checks the settings against the pool they belong to.
func (s UpgradeSettings) Validate(p *Pool) error {
	if s.ConcurrentNodes < 0 || s.ConcurrentNodes > MaxConcurrentNodes {
		return invalid("concurrent-nodes", "pool %s: concurrentNodes %d is outside 1..%d", p.Name, s.ConcurrentNodes, MaxConcurrentNodes)
	}
	if s.MinimumAvailableNodes < 0 {
		return invalid("minimum-available-nodes", "pool %s: minimumAvailableNodes %d is negative", p.Name, s.MinimumAvailableNodes)
	}
	if s.MinimumAvailableNodes >= len(p.Nodes) {
		return invalid("minimum-available-nodes",
			"pool %s: minimumAvailableNodes %d leaves no node of %d free to upgrade", p.Name, s.MinimumAvailableNodes, len(p.Nodes))
	}
	switch s.Strategy {
	case "", StrategySurge, StrategyBlueGreen:
	default:
		return invalid("strategy", "pool %s: strategy %q is not surge or blueGreen", p.Name, s.Strategy)
	}
	if p.Backing != BackingMIG && (s.Strategy != "" || s.MaxSurge != nil || s.MaxUnavailable != nil || s.BlueGreen != nil) {
		return invalid("strategy", "pool %s: strategy, maxSurge, maxUnavailable and blueGreenSettings apply to mig pools only", p.Name)
	}
	if err := s.validateHealth(p); err != nil {
		return err
	}
	if p.Backing != BackingMIG {
		return nil
	}
	return s.validateMIG(p)
}

// Concurrency is how many nodes of the pool may be under upgrade at once.
func (p *Pool) Concurrency() int {
	if p.Role == RoleControlPlane {
		return 1
	}
	if p.Settings.ConcurrentNodes <= 0 {
		return DefaultConcurrentNodes
	}
	return p.Settings.ConcurrentNodes
}
