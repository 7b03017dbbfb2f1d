package phases

import (
	"fmt"
	"time"
)

// SizeRange is how many nodes a MIG pool has, at least and at most, while
// it upgrades (surge: size − maxUnavailable … size + maxSurge per zone;
// blue/green: size … twice the size).
type SizeRange struct {
	Min int
	Max int
}

// PlannedPhase is a blue/green phase with its predicted timeline.
type PlannedPhase struct {
	Phase BlueGreenPhase
	Start time.Time
	End   time.Time
}

// PlannedSoak is what a blue/green pool soaks: after each batch, then as
// a pool, and in all; Capped says the total reached MaxTotalSoak, so blue
// is deleted when it does.
type PlannedSoak struct {
	Batch  time.Duration
	Pool   time.Duration
	Total  time.Duration
	Capped bool
}

// planMIG plans a MIG pool's step from its settings alone, without a cloud
// call: the batches and, for blue/green, the phases. It returns the
// step's predicted length and its lower bound.
func planMIG(ps *PlannedStep, p *Pool, dur Durations, begin time.Time) (length, minimal time.Duration) {
	ps.Strategy = p.Strategy()
	if ps.Strategy == StrategyBlueGreen {
		return planBlueGreen(ps, p, dur, begin)
	}
	surge, unavailable := p.Settings.SurgeBudget()
	width := max(surge+unavailable, 1)
	node := dur.Instance + dur.Drain
	at := begin
	zoneMax := 0
	for _, g := range p.Groups {
		var zone []string
		for _, n := range p.Nodes {
			if n.Zone == g.Zone {
				zone = append(zone, n.Name)
			}
		}
		zoneMax = max(zoneMax, len(zone))
		for i := 0; i < len(zone); i += width {
			b := Batch{Index: len(ps.Batches), Start: at, End: at.Add(node), Nodes: zone[i:min(i+width, len(zone))]}
			ps.Batches = append(ps.Batches, b)
			at = b.End
		}
		minimal += time.Duration(ceilDiv(len(zone), MaxSurgeInFlight)) * node
	}
	// Zones go one after another: the pool's size moves by the budget of
	// one zone at a time.
	ps.SizeRange = &SizeRange{Min: len(p.Nodes) - min(unavailable, zoneMax), Max: len(p.Nodes) + min(surge, zoneMax)}
	ps.Disruption = fmt.Sprintf("workloads: zone by zone, %d node(s) at a time replaced (%d surge, %d unavailable); pods move as their replicas and PDBs allow", width, surge, unavailable)
	return at.Sub(begin), minimal
}

func planBlueGreen(ps *PlannedStep, p *Pool, dur Durations, begin time.Time) (length, minimal time.Duration) {
	bg := newBlueGreenTrack(p.Settings.BlueGreen, len(p.Nodes))
	at := begin
	phase := func(ph BlueGreenPhase, d time.Duration) {
		ps.Phases = append(ps.Phases, PlannedPhase{Phase: ph, Start: at, End: at.Add(d)})
		at = at.Add(d)
	}
	phase(PhaseCreatingGreen, dur.Instance)
	phase(PhaseCordoningBlue, 0)
	soak := &PlannedSoak{Batch: bg.BatchSoak}
	if n := bg.batches(len(p.Nodes)); n > 0 {
		drainStart := at
		for k := range n {
			b := Batch{Index: k, Start: at, End: at.Add(dur.Drain)}
			for i, node := range p.Nodes {
				if bg.inBatch(i, k) {
					b.Nodes = append(b.Nodes, node.Name)
				}
			}
			s := min(bg.BatchSoak, max(MaxTotalSoak-soak.Total, 0))
			soak.Total += s
			ps.Batches = append(ps.Batches, b)
			at = b.End.Add(s)
		}
		ps.Phases = append(ps.Phases, PlannedPhase{Phase: PhaseDrainingBlue, Start: drainStart, End: at})
	}
	soak.Pool = min(bg.PoolSoak, max(MaxTotalSoak-soak.Total, 0))
	soak.Total += soak.Pool
	soak.Capped = soak.Total >= MaxTotalSoak
	if soak.Total-soak.Pool < MaxTotalSoak {
		phase(PhaseSoaking, soak.Pool)
	}
	phase(PhaseDeletingBlue, dur.Drain)
	ps.Soak = soak
	ps.SizeRange = &SizeRange{Min: len(p.Nodes), Max: 2 * len(p.Nodes)}
	ps.Disruption = fmt.Sprintf("workloads: move to the green pool batch by batch (%d node(s) per batch); blue stays cordoned for rollback until its soak ends", bg.BatchSize)
	// Soaks are waits the settings ask for: the lower bound keeps them.
	minimal = dur.Instance + time.Duration(bg.batches(len(p.Nodes)))*dur.Drain + soak.Total + dur.Drain
	return at.Sub(begin), minimal
}
