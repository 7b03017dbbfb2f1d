package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/moltproject/molt/lab"
	"github.com/moltproject/molt/phases"
)

// DemoConfig is the README's main job: from the older release to the newer
// minor on the lab.
type DemoConfig struct {
	Config
	From, To string
	// Keep leaves the lab and the members running at the end (`molt-lab
	// down` removes both: the members live in the lab's namespace).
	Keep bool
	// Auto makes the upgrade automatic (`molt-lab demo --auto`): nobody
	// starts it; channel regular's target is set to To while the
	// maintenance window is closed, and the coordinator's scheduler starts
	// the upgrade by itself when a policy update opens the window
	// (RunAutomatic).
	Auto bool
}

// Demo brings everything up from scratch (a lab left from an earlier run is
// removed first), runs preflight, upgrades to To with live progress until
// status.version is To, and prints the summary.
func Demo(ctx context.Context, cfg DemoConfig) (err error) {
	t0 := time.Now()
	out := cfg.Out
	cfg.Releases = []string{cfg.From, cfg.To}
	cfg.Lab.Version = cfg.From
	// A lab left by an earlier run (say, with --keep) runs another version:
	// start clean. Down also ends members left in the lab's namespace.
	if old, err := lab.New(cfg.Lab); err == nil {
		if err := old.Down(ctx); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(cfg.WorkDir); err != nil {
		return err
	}
	if cfg.Auto && cfg.ProtectionAge == 0 {
		// The lab's "precious" pod (safe-to-evict=false) would hold
		// worker-2 out of an automatic upgrade for a week (SPEC §8).
		cfg.ProtectionAge = time.Minute
		fmt.Fprintln(out, "==> automatic upgrades leave nodes with safe-to-evict=false pods alone for --protection-age (7 days by default); this demo's members use 1m, so the lab's precious pod does not hold worker-2")
	}
	env, err := Up(ctx, cfg.Config)
	defer func() {
		if env == nil {
			return
		}
		if cfg.Keep && err == nil {
			fmt.Fprintf(out, "\nThe lab and the coordinator keep running. Try:\n  sudo ip netns exec %s %s --config %s cluster get %s\n  sudo %s down\n",
				env.Lab.Network().LabNS(), filepath.Join(cfg.BinDir, "moltctl"), env.MoltctlConfig(), ClusterName, "bin/molt-lab")
			if env.GroupService() != nil {
				var urls []string
				for _, m := range env.Members {
					urls = append(urls, m.URL())
				}
				fmt.Fprintf(out, "The MIG pool's instance groups were served by this process, at %s; serve them again before the coordinator works on the pool:\n  sudo bin/molt-lab serve-groups --listen %s --agent %s --coordinator %s --token-file %s --ca-pin %s\n",
					env.GroupService().Endpoint(), strings.TrimPrefix(env.GroupService().Endpoint(), "http://"), filepath.Join(cfg.BinDir, "molt-agent"),
					strings.Join(urls, ","), env.InstancesTokenFile(), env.caPin)
				_ = env.GroupService().Close()
			}
			return
		}
		fmt.Fprintln(out, "==> removing the lab and the coordinator")
		if derr := env.Down(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = derr
		}
	}()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "==> everything up in %s; from another terminal:\n    sudo ip netns exec %s %s --config %s upgrade watch %s\n",
		time.Since(t0).Round(time.Second), env.Lab.Network().LabNS(), filepath.Join(cfg.BinDir, "moltctl"), env.MoltctlConfig(), ClusterName)
	fmt.Fprintf(out, "    Prometheus (members, agents, the workload probes; molt's alert rules): %s\n      sudo ip netns exec %s curl -s '%s/api/v1/query?query=molt_cluster_upgrade_phase==1'\n",
		env.PrometheusURL(), env.Lab.Network().LabNS(), env.PrometheusURL())

	before, err := env.Lab.ContainerdVersions(ctx)
	if err != nil {
		return err
	}
	probes := env.StartProbes(ctx)
	var u *phases.Upgrade
	var took time.Duration
	if cfg.Auto {
		var rep AutoReport
		rep, err = env.RunAutomatic(ctx, AutoOptions{To: cfg.To})
		u, took = rep.Upgrade, rep.Took
	} else {
		u, took, err = env.RunUpgrade(ctx, cfg.To)
	}
	reports := probes.Stop()
	if err != nil {
		return err
	}
	after, err := env.Lab.ContainerdVersions(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n==> status.version = %s (upgrade took %s; demo %s in all)\n\n", cfg.To, took.Round(time.Second), time.Since(t0).Round(time.Second))
	fmt.Fprint(out, Summary(u))
	fmt.Fprintf(out, "containerd, as each host's containerd API reports it: %s\n", ContainerdChange(before, after))
	if cfg.MIG != nil {
		fmt.Fprint(out, MIGSummary(u))
	}
	fmt.Fprintln(out, "the sample workload during the upgrade (20 requests/s on each path):")
	for _, r := range reports {
		fmt.Fprintf(out, "  %s\n", r)
	}
	return nil
}

// ContainerdChange says how the hosts' containerd versions moved, e.g.
// "1.6.20~ds1 → 1.7.35 on 7 of 7 hosts", listing hosts that differ.
func ContainerdChange(before, after map[string]string) string {
	moves := map[string][]string{}
	for host, was := range before {
		k := was + " → " + after[host]
		if was == after[host] {
			k = was + " (unchanged)"
		}
		moves[k] = append(moves[k], host)
	}
	keys := make([]string, 0, len(moves))
	for k := range moves {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		hosts := moves[k]
		sort.Strings(hosts)
		if len(moves) == 1 {
			parts = append(parts, fmt.Sprintf("%s on %d of %d hosts", k, len(hosts), len(before)))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s on %s", k, strings.Join(hosts, ", ")))
	}
	return strings.Join(parts, "; ")
}
