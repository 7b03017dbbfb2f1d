package e2e

import (
	"bytes"
	"context"
	"fmt"

	"github.com/moltproject/molt/lab"
)

// Probes measure what users of the sample workload feel while an upgrade
// runs: requests at a steady rate down each of the lab's paths to it
// (lab.WorkloadProbes), every failure recorded with its time.
type Probes struct {
	running []*lab.Probe
	// log records the data path's pods meanwhile, for the evidence of
	// each outage; logErr says why there is none.
	log    *PodLog
	logErr error
}

// StartProbes starts one probe per path at 20 requests per second, and a
// PodLog beside them.
func (e *Env) StartProbes(ctx context.Context) *Probes {
	p := &Probes{}
	p.log, p.logErr = e.StartPodLog(ctx)
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

// Stop ends every probe and the PodLog, and returns the probes' reports.
func (p *Probes) Stop() []lab.ProbeReport {
	if p.log != nil {
		p.log.Stop()
	}
	out := make([]lab.ProbeReport, 0, len(p.running))
	for _, r := range p.running {
		out = append(out, r.Stop())
	}
	return out
}

// Describe is r's summary line and, under it, each of its outages with the
// data path's pod changes before it (PodLog.PrintEvidence).
func (p *Probes) Describe(r lab.ProbeReport) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n", r)
	switch {
	case len(r.Outages) == 0:
	case p.log == nil:
		fmt.Fprintf(&b, "    (no evidence: the pod watch did not start: %v)\n", p.logErr)
	default:
		p.log.PrintEvidence(&b, r)
	}
	return b.String()
}
