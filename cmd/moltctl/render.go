package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
)

// bar draws a progress bar of width cells.
func bar(done, total, width int) string {
	if total == 0 {
		return strings.Repeat("█", width)
	}
	n := done * width / total
	return strings.Repeat("█", n) + strings.Repeat("░", width-n)
}

// renderUpgrade shows steps, then per pool a bar and the nodes in flight,
// and the coordinator's forecast of the end. It reads the wire only: the
// coordinator's reading of the upgrade (Failing, each node's Step,
// Forecast) stands in for the engine's rules, so moltctl imports no
// engine package (internal/purity holds it to that).
func renderUpgrade(w io.Writer, u *api.Upgrade, now time.Time) {
	fmt.Fprintf(w, "upgrade %s  %s → %s  %s", u.ID, u.From, u.To, strings.ToUpper(string(u.State)))
	if u.PauseReason != "" {
		fmt.Fprintf(w, "  paused: %s", u.PauseReason)
	}
	elapsed := now.Sub(u.CreatedAt)
	if !u.FinishedAt.IsZero() {
		elapsed = u.FinishedAt.Sub(u.CreatedAt)
	}
	fmt.Fprintf(w, "  elapsed %s\n\n", elapsed.Round(time.Second))
	switch u.State {
	case api.UpgradePreflight:
		fmt.Fprintf(w, "  preflight %s runs; the steps below start when it passes (moltctl preflight get %s %s)\n\n", u.Preflight, u.Cluster, u.Preflight)
	case api.UpgradeRefused:
		fmt.Fprintf(w, "  refused by preflight %s: %s (nothing was touched; moltctl preflight get %s %s)\n", u.Preflight, strings.Join(u.RefusedChecks, ", "), u.Cluster, u.Preflight)
		return
	case api.UpgradeFailed:
		fmt.Fprintf(w, "  failed: %s\n\n", u.Reason)
	}
	if u.Failing != "" && u.State == api.UpgradeRunning {
		fmt.Fprintf(w, "  failing, nothing new starts: %s\n\n", u.Failing)
	}
	doneNodes := 0
	for _, n := range u.Nodes {
		if n.State == api.StepDone {
			doneNodes++
		}
	}
	for _, s := range u.Steps {
		line := fmt.Sprintf("  %-8s %-22s", s.State, s.ID)
		if s.Kind == api.StepKindPool {
			p, ok := u.Pool(s.Pool)
			if !ok {
				p = &api.PoolTrack{}
			}
			nodes := u.PoolNodes(p)
			d := 0
			var inflight []string
			for _, n := range nodes {
				switch n.State {
				case api.StepDone:
					d++
				case api.StepRunning:
					// A coordinator before 0.2.0 does not say the step.
					desc := n.Node
					if n.Step != "" {
						desc += ":" + n.Step
					}
					if n.Waiting != "" {
						desc += " (waiting: " + n.Waiting + ")"
					}
					inflight = append(inflight, desc)
				case api.StepFailed:
					inflight = append(inflight, n.Node+":FAILED "+n.Error)
				case api.StepPending:
					// An automatic upgrade leaves the node alone until its
					// protected pods may be evicted (SPEC §8).
					if u.Options.Automatic && n.ProtectedUntil.After(now) {
						inflight = append(inflight, fmt.Sprintf("%s (waiting: protected pods until %s)", n.Node, n.ProtectedUntil.UTC().Format("2006-01-02 15:04 MST")))
					}
				}
			}
			line += fmt.Sprintf(" %s %d/%d", bar(d, len(nodes), 20), d, len(nodes))
			if p.Strategy != "" {
				line += "  " + p.Strategy
			}
			if bg := p.BlueGreen; bg != nil && bg.Phase != "" {
				line += " " + bg.Phase
				if bg.Phase == api.BlueGreenDrainingBlue {
					line += fmt.Sprintf(" batch %d", bg.Batch+1)
				}
				if bg.Phase == api.BlueGreenSoaking && !bg.SoakUntil.IsZero() {
					line += fmt.Sprintf(" until %s", bg.SoakUntil.UTC().Format("15:04 MST"))
				}
				if bg.Waiting != "" {
					line += " (waiting: " + bg.Waiting + ")"
				}
			}
			if p.RollingBack && s.State == api.StepRunning {
				line += " ROLLING BACK"
			}
			for _, n := range nodes {
				if n.RedGate != "" && n.State == api.StepRunning {
					line += "  HELD by gate " + n.RedGate
					break
				}
			}
			if len(inflight) > 0 {
				line += "  " + strings.Join(inflight, ", ")
			}
		} else if s.Message != "" && s.State != api.StepDone {
			line += " " + s.Message
		}
		fmt.Fprintln(w, line)
	}
	if u.State != api.UpgradeRunning {
		return
	}
	// The ETA is the coordinator's (api.UpgradeForecast): what is left is
	// End-At, measured on its clock, so a client's skewed clock does not
	// move it.
	fmt.Fprintf(w, "\n  %d/%d nodes done, ", doneNodes, len(u.Nodes))
	if f := u.Forecast; f != nil {
		left := f.End.Sub(f.At)
		if u.PauseReason != "" {
			fmt.Fprintf(w, "ETA %s once it resumes\n", left.Round(time.Second))
		} else {
			layout := "15:04 MST"
			if left >= 24*time.Hour {
				layout = "2006-01-02 15:04 MST"
			}
			fmt.Fprintf(w, "ETA %s (%s)\n", left.Round(time.Second), f.End.UTC().Format(layout))
		}
	} else {
		fmt.Fprintln(w, "no ETA: a failed node holds its pool (moltctl node retry CLUSTER NODE)")
	}
}

func printPlan(w io.Writer, p api.Plan) {
	fmt.Fprintf(w, "plan %s: %s → %s, predicted %s (critical path at least %s)\n\n", p.Cluster, p.From, p.To, p.Total, p.CriticalPath)
	for _, s := range p.Steps {
		fmt.Fprintf(w, "  %-22s +%-8s → +%-8s %s\n", s.ID, s.Start.Sub(p.Start), s.End.Sub(p.Start), s.Disruption)
		if s.Strategy != "" && s.SizeRange != nil {
			fmt.Fprintf(w, "      %s; pool size %d–%d nodes while it upgrades\n", s.Strategy, s.SizeRange.Min, s.SizeRange.Max)
		}
		for _, ph := range s.Phases {
			fmt.Fprintf(w, "      %-20s +%-8s → +%s\n", ph.Phase, ph.Start.Sub(p.Start), ph.End.Sub(p.Start))
		}
		if k := s.Soak; k != nil {
			capped := ""
			if k.Capped {
				capped = " (capped at 7 days: blue is deleted when it is reached)"
			}
			fmt.Fprintf(w, "      soak: %s after each batch, %s as a pool, %s in all%s\n", k.Batch, k.Pool, k.Total, capped)
		}
		for _, b := range s.Batches {
			fmt.Fprintf(w, "      batch %d: %s\n", b.Index+1, strings.Join(b.Nodes, ", "))
		}
	}
	if len(p.Waits) > 0 || p.WindowNeverOpens {
		fmt.Fprintf(w, "\nan automatic upgrade waits for its maintenance window; expected to finish %s\n", p.End.UTC().Format(time.RFC3339))
	}
	for _, wt := range p.Waits {
		fmt.Fprintf(w, "  wait %s → %s before %s (%s)\n", wt.Start.UTC().Format(time.RFC3339), wt.End.UTC().Format(time.RFC3339), wt.Step, wt.Target)
	}
	if p.WindowNeverOpens {
		fmt.Fprintln(w, "  the window never opens again for a step: the rest is not predicted")
	}
}
