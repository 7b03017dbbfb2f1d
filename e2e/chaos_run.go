package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moltproject/molt/lab"
)

// ChaosRunConfig configures `make chaos` (cmd/molt-chaos): Runs runs,
// each on a lab of its own brought up at From and upgraded to To under
// the schedule drawn from Seed+i.
type ChaosRunConfig struct {
	// Lab is the lab's configuration (cache, builds, module dir,
	// topology); the runner sets its state directory, prefix and version.
	Lab    lab.Config
	BinDir string
	// WorkDir holds one directory per run; a run with a violation or an
	// unexplained halt keeps its directory (member logs, agent journals).
	WorkDir  string
	From, To string
	Runs     int
	Seed     uint64
	Profile  ChaosProfile
	// Deadline bounds each upgrade; past it, an upgrade still running is
	// halted (when it says why it waits) or wedged.
	Deadline time.Duration
	// Keep keeps every run's directory, not only those that found
	// something (to read how a run went).
	Keep bool
	Out  io.Writer
}

// ChaosPrefix starts the namespace names of the chaos runs' labs.
const ChaosPrefix = "mlabc-"

// RunChaos runs the chaos runs one after another, printing each run's
// table as it ends, and returns the reports (a run whose lab did not come
// up has a nil report and its error).
func RunChaos(ctx context.Context, cfg ChaosRunConfig) ([]*ChaosReport, []error) {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Deadline == 0 {
		cfg.Deadline = 25 * time.Minute
	}
	reports := make([]*ChaosReport, cfg.Runs)
	errs := make([]error, cfg.Runs)
	for i := range cfg.Runs {
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			continue
		}
		seed := cfg.Seed + uint64(i)
		fmt.Fprintf(cfg.Out, "\n=== chaos run %d of %d: seed %d, v%s → v%s, profile %s\n", i+1, cfg.Runs, seed, cfg.From, cfg.To, cfg.Profile.Name)
		t0 := time.Now()
		rep, err := runChaosOnce(ctx, cfg, seed)
		reports[i], errs[i] = rep, err
		if err != nil {
			fmt.Fprintf(cfg.Out, "=== run %d (seed %d) did not run to its checks: %v\n", i+1, seed, err)
			continue
		}
		fmt.Fprintf(cfg.Out, "\n%s(run %d of %d in %s)\n", rep.Table(), i+1, cfg.Runs, time.Since(t0).Round(time.Second))
	}
	fmt.Fprintf(cfg.Out, "\n%s", ChaosSummary(reports, errs))
	return reports, errs
}

func runChaosOnce(ctx context.Context, cfg ChaosRunConfig, seed uint64) (rep *ChaosReport, err error) {
	work := filepath.Join(cfg.WorkDir, fmt.Sprintf("seed-%d", seed))
	if err := os.RemoveAll(work); err != nil {
		return nil, err
	}
	lcfg := cfg.Lab
	lcfg.StateDir = filepath.Join(work, "lab")
	lcfg.Prefix = ChaosPrefix
	lcfg.Version = cfg.From
	// A run that was killed leaves its lab: remove it first.
	if stale, err := lab.New(lcfg); err == nil {
		if err := stale.Down(ctx); err != nil {
			return nil, err
		}
	}
	env, err := Up(ctx, Config{
		Lab: lcfg, BinDir: cfg.BinDir, WorkDir: work, BasePort: 7280,
		Releases: []string{cfg.From, cfg.To}, DrainTimeout: 2 * time.Minute,
		GateInterval: 3 * time.Second, Out: cfg.Out, Log: lcfg.Log,
		// A MIG pool beside the bare-metal ones (surge, a zone at a
		// time), upgraded beside the workers as in the e2e test.
		MIG: DefaultMIGPool(), ConcurrentWorkerPools: 2,
	})
	var ch *Chaos
	defer func() {
		keep := cfg.Keep || err != nil || (rep != nil && (len(rep.Violations()) > 0 || !rep.Explained))
		if env != nil {
			if keep {
				saveAgentLogs(env, work)
			}
			env.Close()
			if ch != nil {
				ch.Close()
			}
			if derr := env.Lab.Down(context.WithoutCancel(ctx)); derr != nil && err == nil {
				err = derr
			}
		}
		if keep {
			fmt.Fprintf(cfg.Out, "=== kept %s (member logs, agent journals)\n", work)
		} else {
			_ = os.RemoveAll(work)
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("lab up: %w", err)
	}
	ch, err = env.StartChaos(ctx, ChaosConfig{Seed: seed, Profile: cfg.Profile, Out: cfg.Out})
	if err != nil {
		return nil, err
	}
	probes := env.StartProbes(ctx)
	started, err := env.StartUpgrade(ctx, cfg.To)
	if err != nil {
		probes.Stop()
		ch.Finish(ctx, true)
		return nil, fmt.Errorf("start upgrade: %w", err)
	}
	fmt.Fprintf(cfg.Out, "==> upgrade %s started; following it (deadline %s)\n", started.ID, cfg.Deadline)
	_, passed := ch.WaitEnd(ctx, time.Now().Add(cfg.Deadline))
	reports := probes.Stop()
	rep = ch.Finish(ctx, passed)
	rep.Probes = reports
	return rep, nil
}

// saveAgentLogs copies every host's agent journal and the tail of its
// molt-agent log into dir, for a run kept to be looked at.
func saveAgentLogs(env *Env, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, h := range env.Lab.Config().Topology.Hosts {
		if hh, err := env.Lab.Host(h.Name); err == nil {
			if b, err := os.ReadFile(filepath.Join(hh.Root(), "/var/lib/molt-agent/journal.jsonl")); err == nil {
				_ = os.WriteFile(filepath.Join(dir, h.Name+".journal.jsonl"), b, 0o644)
			}
		}
		out, _ := env.Lab.Exec(ctx, h.Name, "journalctl", "-u", "molt-agent", "--no-pager", "-n", "400")
		_ = os.WriteFile(filepath.Join(dir, h.Name+".molt-agent.log"), out, 0o644)
	}
}

// Table is a run's report: its faults, the invariants, the probes.
func (r *ChaosReport) Table() string {
	var b strings.Builder
	u := r.Upgrade
	if u == nil {
		fmt.Fprintf(&b, "seed %d: no upgrade seen\n", r.Seed)
	} else {
		took := u.FinishedAt.Sub(u.CreatedAt)
		if u.FinishedAt.IsZero() {
			took = 0
		}
		fmt.Fprintf(&b, "seed %d, upgrade %s v%s → v%s: %s (%s) in %s\n", r.Seed, u.ID, u.From, u.To, r.Ending, r.EndDetail, took.Round(time.Second))
	}
	if !r.Explained {
		b.WriteString("  UNEXPLAINED HALT: no injected fault accounts for it\n")
	}
	fmt.Fprintf(&b, "| t (s) | fault | target | trigger | fired while | lasted | note |\n|---|---|---|---|---|---|---|\n")
	for _, f := range r.Faults {
		if !f.Fired {
			fmt.Fprintf(&b, "| — | %s | — | %s | (not reached) | — | |\n", kindVariant(f.Fault), f.Trigger)
			continue
		}
		var note []string
		if f.Waited > time.Second {
			note = append(note, fmt.Sprintf("waited %.0fs for the member fault before it", f.Waited.Seconds()))
		}
		if f.NewLeader > 0 {
			note = append(note, fmt.Sprintf("new leader +%.1fs", f.NewLeader.Seconds()))
		}
		if f.Next > 0 {
			note = append(note, fmt.Sprintf("next step +%.1fs (held %.1fs past the election and the operations in flight)", f.Next.Seconds(), f.Held.Seconds()))
		}
		if f.Err != "" {
			note = append(note, "ERROR "+f.Err)
		}
		lasted := "—"
		if f.Lasted > 0 {
			lasted = f.Lasted.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "| %.1f | %s | %s | %s | %s | %s | %s |\n", f.At.Seconds(), kindVariant(f.Fault), f.Target, f.Trigger, f.Seen, lasted, strings.Join(note, "; "))
	}
	b.WriteString("invariants:\n")
	for _, c := range r.Checks {
		mark := "ok  "
		if len(c.Violations) > 0 {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %-17s %s\n", mark, c.Name, c.Detail)
		for _, v := range c.Violations {
			fmt.Fprintf(&b, "       %s\n", v)
		}
	}
	for _, p := range r.Probes {
		fmt.Fprintf(&b, "  probe %s\n", p)
	}
	if r.Bound != nil {
		fmt.Fprintf(&b, "  lab row: %s\n", r.Bound)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	return b.String()
}

func kindVariant(f Fault) string {
	s := string(f.Kind)
	if f.Variant != "" {
		s += " (" + f.Variant + ")"
	}
	if f.Component != "" {
		s += " " + f.Component
	}
	return s
}

// ChaosSummary is the table of all runs and the summary line: runs,
// completed, halted-with-reason, violations.
func ChaosSummary(reports []*ChaosReport, errs []error) string {
	var b strings.Builder
	b.WriteString("| run | seed | ending | faults fired | upgrade | probes: failed / longest outage | violations |\n|---|---|---|---|---|---|---|\n")
	runs, completed, halted, unexplained, violations, notRun := 0, 0, 0, 0, 0, 0
	for i, r := range reports {
		if r == nil {
			notRun++
			err := "not run"
			if i < len(errs) && errs[i] != nil {
				err = errs[i].Error()
			}
			fmt.Fprintf(&b, "| %d | — | %s | | | | |\n", i+1, strings.ReplaceAll(err, "|", "/"))
			continue
		}
		runs++
		fired := 0
		var kinds []string
		for _, f := range r.Faults {
			if f.Fired {
				fired++
				kinds = append(kinds, kindVariant(f.Fault))
			}
		}
		switch r.Ending {
		case EndCompleted:
			completed++
		case EndHalted:
			halted++
			if !r.Explained {
				unexplained++
			}
		}
		v := r.Violations()
		violations += len(v)
		took := "—"
		if u := r.Upgrade; u != nil && !u.FinishedAt.IsZero() {
			took = u.FinishedAt.Sub(u.CreatedAt).Round(time.Second).String()
		}
		var probes []string
		for _, p := range r.Probes {
			probes = append(probes, fmt.Sprintf("%d / %s", p.Failed, p.LongestOutage.Round(10*time.Millisecond)))
		}
		ending := string(r.Ending)
		if r.Ending == EndHalted {
			ending += ": " + r.EndDetail
			if !r.Explained {
				ending = "UNEXPLAINED " + ending
			}
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %d: %s | %s | %s | %d |\n", i+1, r.Seed, strings.ReplaceAll(ending, "|", "/"), fired, strings.Join(kinds, ", "), took, strings.Join(probes, "; "), len(v))
	}
	fmt.Fprintf(&b, "\nruns %d, completed %d, halted-with-reason %d (%d unexplained), violations %d", runs, completed, halted, unexplained, violations)
	if notRun > 0 {
		fmt.Fprintf(&b, " (%d more did not run to their checks)", notRun)
	}
	b.WriteString("\n")
	return b.String()
}
