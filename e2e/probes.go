package e2e

import (
	"context"

	"github.com/moltproject/molt/lab"
)

// Probes measure what users of the sample workload feel while an upgrade
// runs: requests at a steady rate down each of the lab's paths to it
// (lab.WorkloadProbes), every failure recorded with its time.
type Probes struct {
	running []*lab.Probe
}

// StartProbes starts one probe per path at 20 requests per second.
func (e *Env) StartProbes(ctx context.Context) *Probes {
	p := &Probes{}
	for _, cfg := range e.Lab.WorkloadProbes() {
		cfg.Rate = 20
		if x := e.exporter; x != nil {
			name := cfg.Name
			cfg.OnResult = func(passed bool) { x.probeResult(name, passed) }
		}
		p.running = append(p.running, lab.StartProbe(ctx, cfg))
	}
	return p
}

// Stop ends every probe and returns their reports.
func (p *Probes) Stop() []lab.ProbeReport {
	out := make([]lab.ProbeReport, 0, len(p.running))
	for _, r := range p.running {
		out = append(out, r.Stop())
	}
	return out
}
