// Command molt-chaos runs chaos runs on the lab (`make chaos`): each run
// brings a lab up at the older release, upgrades it to the newer minor
// while a seeded schedule injects faults (members killed, frozen and
// partitioned, agents killed, a host's link to the coordinator cut, the
// kube-apiserver load balancer down, an artifact with a wrong checksum),
// then checks the invariants and prints a table; the last line is the
// summary: runs, completed, halted-with-reason, violations. See
// docs/chaos.md.
//
//	molt-chaos [--runs 3] [--seed N] [--profile full|smoke|none] [--bin bin]
//
// Run i uses seed N+i: `molt-chaos --runs 1 --seed N+i` repeats its faults.
// It needs root, the lab's inputs (make deps) and the binaries (make
// build); take the machine's lab lock around it when others share it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/moltproject/molt/e2e"
	"github.com/moltproject/molt/lab"
)

func main() {
	cfg := e2e.ChaosRunConfig{Lab: lab.DefaultConfig()}
	flag.IntVar(&cfg.Runs, "runs", 3, "number of runs, one lab each")
	seed := flag.Uint64("seed", 0, "seed of the first run (run i uses seed+i); 0: from the clock, printed")
	profile := flag.String("profile", "full", "fault profile: full (make chaos), smoke (the e2e test's), none (no faults: invariants and the lab row of docs/performance.md)")
	flag.StringVar(&cfg.From, "from", "1.33.13", "release the lab starts at")
	flag.StringVar(&cfg.To, "to", "1.34.3", "release the upgrade goes to")
	flag.StringVar(&cfg.BinDir, "bin", "bin", "directory with molt-coordinator, molt-agent and moltctl")
	flag.StringVar(&cfg.WorkDir, "work-dir", "/var/tmp/molt-chaos", "one directory per run (kept when the run found something)")
	flag.DurationVar(&cfg.Deadline, "deadline", 25*time.Minute, "how long an upgrade may run before it counts as halted (with a reason) or wedged")
	flag.BoolVar(&cfg.Keep, "keep", false, "keep every run's directory (member logs, agent journals), not only those that found something")
	verbose := flag.Bool("v", false, "the lab's warnings on stderr")
	flag.Parse()
	p, err := e2e.ProfileByName(*profile)
	if err != nil {
		fail(err)
	}
	cfg.Profile = p
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano() % 1_000_000_000)
	}
	cfg.Seed = *seed
	cfg.Lab.Cache = envOr("MOLT_CACHE", cfg.Lab.Cache)
	cfg.Lab.BuildCache = envOr("MOLT_BUILD_CACHE", cfg.Lab.Cache)
	if wd, err := os.Getwd(); err == nil {
		cfg.Lab.ModuleDir = wd
	}
	if abs, err := filepath.Abs(cfg.BinDir); err == nil {
		cfg.BinDir = abs
	}
	level := slog.Level(100)
	if *verbose {
		level = slog.LevelWarn
	}
	cfg.Lab.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg.Out = os.Stdout
	fmt.Printf("molt-chaos: %d runs, seeds %d..%d, profile %s, v%s → v%s\n", cfg.Runs, cfg.Seed, cfg.Seed+uint64(cfg.Runs)-1, p.Name, cfg.From, cfg.To)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reports, errs := e2e.RunChaos(ctx, cfg)
	bad := 0
	for i, r := range reports {
		if r == nil || errs[i] != nil || len(r.Violations()) > 0 || !r.Explained {
			bad++
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "molt-chaos:", err)
	os.Exit(2)
}
