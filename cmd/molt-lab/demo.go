package main

import (
	"context"
	"flag"
	"os"
	"time"

	"github.com/moltproject/molt/e2e"
	"github.com/moltproject/molt/lab"
)

// demo is molt's main job (the README's first command): the lab at the
// older release, a three-member coordinator, agents on every host, and a
// real upgrade to the newer minor, watched live.
func demo(ctx context.Context, cfg lab.Config, args []string) error {
	d := e2e.DemoConfig{Config: e2e.Config{Lab: cfg}}
	fs := flag.NewFlagSet("molt-lab demo", flag.ExitOnError)
	fs.StringVar(&d.From, "from", "1.33.13", "release the lab starts at")
	fs.StringVar(&d.To, "to", "1.34.4", "release to upgrade to")
	fs.StringVar(&d.BinDir, "bin", "bin", "directory with molt-coordinator, molt-agent and moltctl")
	fs.StringVar(&d.WorkDir, "work-dir", "/var/lib/molt/demo", "coordinator data directories, logs and artifacts (emptied first)")
	fs.DurationVar(&d.DrainTimeout, "drain-timeout", 2*time.Minute, "best-effort drain deadline per node (at most 20m)")
	fs.BoolVar(&d.Keep, "keep", false, "leave the lab and the coordinator running at the end")
	small := fs.Bool("small", false, "small topology: 1 control-plane LB, 1 control-plane host, 1 worker")
	fs.BoolVar(&d.Auto, "auto", false, "an automatic patch upgrade instead (default --from 1.34.3 --to 1.34.4): the scheduler starts it by itself when the maintenance window opens")
	mig := fs.Bool("mig", true, "add a MIG-backed worker pool of lab instance groups (2 zones × 1 instance, surge), upgraded beside the bare-metal pools")
	_ = fs.Parse(args)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if d.Auto && !set["from"] {
		d.From = "1.34.3"
	}
	if *small {
		d.Lab.Topology = lab.SmallTopology()
	}
	if *mig {
		d.MIG = e2e.DefaultMIGPool()
		d.ConcurrentWorkerPools = 2
	}
	d.Out = os.Stdout
	d.Log = cfg.Log
	return e2e.Demo(ctx, d)
}
