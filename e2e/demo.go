package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/lab"
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
	var surge *SurgeWatch
	if cfg.MIG != nil {
		if surge, err = WatchSurge(ctx, env); err != nil {
			return err
		}
		defer surge.Stop()
	}
	probes := env.StartProbes(ctx)
	var u *api.Upgrade
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
	if bs, err := Backups(ctx, env); err == nil {
		fmt.Fprintln(out, "etcd backups, as `moltctl backup list` shows them (newest first):")
		for _, b := range bs {
			fmt.Fprintf(out, "  %s taken %s by %s from %s: revision %d, %d bytes, sha256 %.12s…, etcd %s, held by %s\n",
				b.ID, b.TakenAt.Format(time.TimeOnly), b.Node, b.Member, b.Revision, b.Size, b.SHA256, b.EtcdVersion, b.Holder)
		}
	}
	if moves, err := EtcdMoves(ctx, env); err == nil && len(moves) > 0 {
		fmt.Fprintln(out, "etcd, as each control-plane host's agent journal records it (etcd first, then the etcd gate):")
		for _, m := range moves {
			fmt.Fprintf(out, "  %s\n", m)
		}
	}
	if cfg.MIG != nil {
		fmt.Fprint(out, MIGSummary(u))
	}
	fmt.Fprintln(out, "the sample workload during the upgrade (20 requests/s on each path):")
	for _, r := range reports {
		fmt.Fprintf(out, "  %s", probes.Describe(r))
	}
	return verify(ctx, env, cfg, u, before, after, surge)
}

// verify checks the finished upgrade against the real cluster with the
// e2e test's checks (verify.go), prints each, and fails the demo when one
// fails: the demo is the suite's one run of the minor on the full lab.
func verify(ctx context.Context, env *Env, cfg DemoConfig, u *api.Upgrade, before, after map[string]string, surge *SurgeWatch) error {
	out := cfg.Out
	type result struct {
		name string
		err  error
	}
	var results []result
	results = append(results, result{"order (SPEC §4): every step and node done, one control-plane node at a time", VerifyOrder(u)})
	results = append(results, result{"the cluster at " + cfg.To + ": every Node Ready at it, control-plane static pods on its images, containerd the release's on every host, add-ons rolled out, the workload serving by pod and by Service name",
		VerifyClusterAt(ctx, env, u, cfg.To, nil)})
	if ef, et := lab.EtcdVersionFor(cfg.From), lab.EtcdVersionFor(cfg.To); ef != et {
		results = append(results, result{"etcd " + ef + " → " + et + " on every control-plane node, etcd before the other components, behind the etcd gate",
			VerifyEtcdMoved(ctx, env, cfg.From, cfg.To)})
	}
	results = append(results, result{"an etcd backup of this upgrade listed, taken before any control-plane node changed", VerifyBackupFirst(ctx, env, u)})
	results = append(results, result{"molt's record of every control-plane node's static pods, as its agent reported them, on " + cfg.To + "'s images; no node drifted",
		VerifyStaticPodsObserved(ctx, env, cfg.To)})
	ops, err := VerifyOperationsOnce(ctx, env)
	results = append(results, result{fmt.Sprintf("every operation took effect once (%d operations in the agents' journals)", ops), err})
	from, to, err := releaseContainerd(ctx, env, cfg.From, cfg.To)
	switch {
	case err != nil:
		results = append(results, result{"containerd", err})
	case from != to:
		results = append(results, result{"containerd changed on every host (" + from + " → " + to + ")", VerifyContainerdChanged(before, after)})
	}
	if surge != nil {
		if p, ok := u.Pool(cfg.MIG.Name); ok && p.Strategy == api.StrategySurge {
			results = append(results, result{"the MIG pool by surge: every instance replaced zone after zone, each zone within [size, size+1] (" + surge.Sizes() + "), the replacements Ready at " + cfg.To + ", the old hosts and Nodes gone",
				surge.Verify(ctx, u, cfg.To)})
		}
	}
	fmt.Fprintln(out, "==> verified against the cluster:")
	var failed []string
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(out, "  FAILED %s\n         %v\n", r.name, r.err)
			failed = append(failed, r.err.Error())
			continue
		}
		fmt.Fprintf(out, "  ok     %s\n", r.name)
	}
	if len(failed) > 0 {
		return fmt.Errorf("the upgrade finished but %d check(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

// releaseContainerd: the containerd versions the releases from and to
// carry.
func releaseContainerd(ctx context.Context, env *Env, from, to string) (string, string, error) {
	var a, b api.Release
	if _, err := env.API().Do(ctx, http.MethodGet, "/v1/releases/"+from, nil, &a); err != nil {
		return "", "", err
	}
	if _, err := env.API().Do(ctx, http.MethodGet, "/v1/releases/"+to, nil, &b); err != nil {
		return "", "", err
	}
	return a.Components.Containerd.Version, b.Components.Containerd.Version, nil
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
