// Command molt-lab runs molt's local lab: a real Kubernetes cluster on
// systemd-nspawn hosts on this machine (see docs/lab.md).
//
//	molt-lab demo [--from 1.33.13] [--to 1.34.4] [--keep] [--small] [--auto]   (molt's main job; see e2e)
//	molt-lab up [--small] [--version 1.34.4] [--agent BIN --coordinator URL]
//	molt-lab status
//	molt-lab serve-groups [--listen 127.0.0.1:PORT] [--agent BIN --coordinator URL --token-file F --ca-pin P]
//	molt-lab down
//	molt-lab render [--out vagrant/.lab]   (host files for the Vagrant lab)
//
// It needs root, systemd-nspawn, containerd/runc/debootstrap on this
// machine, and Kubernetes binaries built by build/k8s/build.sh.
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

	"github.com/moltproject/molt/internal/version"
	"github.com/moltproject/molt/lab"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	if cmd == "--version" || cmd == "-version" {
		// molt's release; "up --version" is the Kubernetes version the
		// lab's hosts start at.
		fmt.Println(version.Get().String())
		return
	}
	cfg := lab.DefaultConfig()
	if cmd == "demo" {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		cfg.Out = os.Stdout
		cfg.Cache = envOr("MOLT_CACHE", cfg.Cache)
		cfg.BuildCache = envOr("MOLT_BUILD_CACHE", cfg.Cache)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := demo(ctx, cfg, args); err != nil {
			fail(err)
		}
		return
	}
	fs := flag.NewFlagSet("molt-lab "+cmd, flag.ExitOnError)
	small := fs.Bool("small", false, "small topology: 1 control-plane LB, 1 control-plane host, 1 worker")
	fs.StringVar(&cfg.Version, "version", cfg.Version, "Kubernetes version the hosts start at")
	fs.StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "lab state (PKI, kubeconfigs, console logs)")
	fs.StringVar(&cfg.Cache, "cache", envOr("MOLT_CACHE", cfg.Cache), "the lab's own cache: tools, images, rootfs")
	fs.StringVar(&cfg.BuildCache, "build-cache", os.Getenv("MOLT_BUILD_CACHE"), "Kubernetes and etcd builds (default: --cache)")
	fs.StringVar(&cfg.ModuleDir, "module-dir", cfg.ModuleDir, "molt repository root (to build the lab's tools)")
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "start of every namespace name the lab makes (a test's lab: mlabt-, mlabe-)")
	fs.DurationVar(&cfg.ReadyTimeout, "timeout", cfg.ReadyTimeout, "how long to wait for the API and Nodes")
	verbose := fs.Bool("v", false, "debug logs")
	renderDir := fs.String("out", "vagrant/.lab", "render: where to write each host's files")
	agentBin := fs.String("agent", "", "up, serve-groups: install this molt-agent binary into every host (every new instance) with systemd/install.sh")
	coordinator := fs.String("coordinator", "https://"+lab.GatewayIP+":7080", "up --agent: coordinator URL the agents use")
	token := fs.String("token", "", "up --agent: the agents' bootstrap token (moltctl token create --cluster molt-lab --uses N)")
	caPin := fs.String("ca-pin", "", "up --agent: the coordinator's CA pin, sha256:<hex> (molt-coordinator prints it)")
	listen := fs.String("listen", "127.0.0.1:0", "serve-groups: address on the lab namespace's loopback (the endpoint a cluster's cloud spec names)")
	tokenFile := fs.String("token-file", "", "serve-groups --agent: file holding the bootstrap token new instances' agents enroll with")
	cluster := fs.String("cluster", "lab", "serve-groups --agent: the cluster new instances' agents join")
	_ = fs.Parse(args)
	if *agentBin != "" {
		script := filepath.Join(cfg.ModuleDir, "systemd", "install.sh")
		cfg.AfterHost = func(ctx context.Context, h *lab.Host, spec lab.HostSpec) error {
			return lab.InstallAgent(ctx, h, script, *agentBin,
				"coordinator="+*coordinator, "token="+*token, "ca_pin="+*caPin, "cluster=molt-lab", "node="+spec.Name)
		}
	}
	if *small {
		cfg.Topology = lab.SmallTopology()
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg.Out = os.Stdout

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := lab.New(cfg)
	if err != nil {
		fail(err)
	}
	switch cmd {
	case "up":
		err = l.Up(ctx)
	case "down":
		t0 := time.Now()
		if err = l.Down(ctx); err == nil {
			fmt.Printf("==> lab down in %s\n", time.Since(t0).Round(time.Millisecond))
		}
	case "render":
		if err = l.Render(*renderDir); err == nil {
			fmt.Printf("==> host files for %d hosts in %s\n", len(cfg.Topology.Hosts), *renderDir)
		}
	case "serve-groups":
		err = serveGroups(ctx, l, lab.GroupsConfig{Listen: *listen}, *agentBin, *coordinator, *tokenFile, *caPin, *cluster)
	case "status":
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		l.Status(sctx).Print(os.Stdout, l.Network().LabNS())
	default:
		usage()
	}
	if err != nil {
		fail(err)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "molt-lab:", err)
	os.Exit(1)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: molt-lab demo [--keep] | up [--small] [--version 1.34.4] | status | serve-groups [--listen ADDR] | down | render [--out DIR]   (flags: -h)")
	os.Exit(2)
}
