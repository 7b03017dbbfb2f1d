// Command molt-agent is molt's host agent, run by systemd as
// molt-agent.service on every cluster host. It registers with the
// coordinator, reports health and executes the typed host operations
// (see package agent and docs/agent.md).
//
// Every flag has an environment fallback MOLT_AGENT_<FLAG> (upper case,
// dashes as underscores), which is how /etc/molt/agent.env configures the
// unit. Logs go to stderr as structured text; journald collects them.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/moltproject/molt/agent"
	"github.com/moltproject/molt/internal/envflag"
	"github.com/moltproject/molt/internal/version"
	"github.com/moltproject/molt/systemd"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "molt-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) > 1 && os.Args[1] == "guard" {
		return guard()
	}
	cfg := agent.DefaultConfig()
	fs := flag.NewFlagSet("molt-agent", flag.ContinueOnError)
	fs.StringVar(&cfg.Coordinator, "coordinator", "", "coordinator base URL, or its members' URLs separated by commas (required)")
	fs.StringVar(&cfg.BootstrapToken, "bootstrap-token", "", "bootstrap token to enroll with (moltctl token create --cluster C); not needed once enrolled")
	fs.StringVar(&cfg.BootstrapToken, "token", "", "short for --bootstrap-token")
	fs.StringVar(&cfg.CAPin, "ca-pin", "", "the cluster CA's pin, sha256:<hex> of its public key (molt-coordinator prints it); the coordinator must match it before anything is sent")
	fs.StringVar(&cfg.Cluster, "cluster", "", "cluster name (required)")
	fs.StringVar(&cfg.Node, "node", "", "node name (default: hostname)")
	fs.StringVar(&cfg.Address, "address", "", "host:port other hosts can probe this host at")
	fs.StringVar(&cfg.HostRoot, "host-root", cfg.HostRoot, "root under which every host path is taken")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "journal, backups and downloads")
	fs.StringVar(&cfg.KubeletBin, "kubelet-bin", cfg.KubeletBin, "kubelet binary")
	fs.StringVar(&cfg.ContainerdBin, "containerd-bin", cfg.ContainerdBin, "containerd binary")
	agentUnit := fs.String("agent-unit", "molt-agent.service", "the agent's own systemd unit, which an UpdateAgent operation restarts")
	fs.StringVar(&cfg.KubeletUnit, "kubelet-unit", cfg.KubeletUnit, "kubelet's systemd unit")
	fs.StringVar(&cfg.ContainerdUnit, "containerd-unit", cfg.ContainerdUnit, "containerd's systemd unit")
	fs.StringVar(&cfg.ManifestDir, "manifest-dir", cfg.ManifestDir, "static-pod manifest directory")
	fs.Func("etcd-endpoints", "comma-separated etcd client URLs asked first (default "+strings.Join(cfg.EtcdEndpoints, ",")+"); the other members are learnt from them", func(v string) error {
		cfg.EtcdEndpoints = strings.Split(v, ",")
		return nil
	})
	fs.StringVar(&cfg.EtcdCAFile, "etcd-ca", cfg.EtcdCAFile, "etcd CA certificate (control-plane hosts)")
	fs.StringVar(&cfg.EtcdCertFile, "etcd-cert", cfg.EtcdCertFile, "etcd client certificate; a host without it has no etcd")
	fs.StringVar(&cfg.EtcdKeyFile, "etcd-key", cfg.EtcdKeyFile, "etcd client key")
	fs.StringVar(&cfg.KubeletHealthz, "kubelet-healthz", cfg.KubeletHealthz, "kubelet health URL")
	fs.StringVar(&cfg.ContainerdSocket, "containerd-socket", cfg.ContainerdSocket, "containerd socket")
	fs.StringVar(&cfg.Snapshotter, "snapshotter", cfg.Snapshotter, "snapshotter for unpacking images")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", cfg.HeartbeatInterval, "longest time between heartbeats")
	fs.DurationVar(&cfg.HealthTimeout, "health-timeout", cfg.HealthTimeout, "wait for a restarted component to be healthy")
	fs.DurationVar(&cfg.StaticPodTimeout, "static-pod-timeout", cfg.StaticPodTimeout, "default wait for new static pods")
	fs.DurationVar(&cfg.PollWait, "poll-wait", cfg.PollWait, "long-poll duration")
	fs.Int64Var(&cfg.StageMaxBytes, "stage-max-bytes", cfg.StageMaxBytes, "bound of the artifact stage, where artifacts an upgrade's preflight verified are kept for its operations; 0 turns staging off")
	listenAddr := fs.String("listen", ":7443", "host:port serving GET /metrics and /healthz; empty disables it. "+
		"It is also the port peers probe in preflight's network check (they dial --address, so give --address this port)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	bus := fs.String("dbus-address", "", "D-Bus address of systemd (default: the system bus)")
	holdAt := fs.String("test-hold-at", "", "TESTING ONLY: pause every operation at this step while --test-hold-file exists")
	holdFile := fs.String("test-hold-file", "", "TESTING ONLY: see --test-hold-at")
	showVersion := fs.Bool("version", false, "print molt's version and exit")
	if err := envflag.Parse(fs, os.Args[1:], "MOLT_AGENT_"); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println(version.Get())
		return nil
	}
	if cfg.Node == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		cfg.Node = h
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = log
	cfg.Version = version.Version

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	units, err := systemd.Connect(ctx, *bus)
	if err != nil {
		// The agent still heartbeats and runs image and preflight
		// operations; binary upgrades fail with a clear error.
		log.Error("no systemd unit control; binary upgrades will fail", "err", err)
	} else {
		defer units.Close()
		cfg.Units = units
		cfg.RestartSelf = func(ctx context.Context) error { return units.QueueRestart(ctx, *agentUnit) }
	}
	// UpdateAgent replaces the binary this process runs from (the unit's
	// ExecStart: /usr/bin in the package, /usr/local/bin from install.sh);
	// a host root other than / keeps the default, taken under it.
	if exe, err := os.Executable(); err == nil && cfg.HostRoot == "/" {
		if p, err := filepath.EvalSymlinks(exe); err == nil {
			exe = p
		}
		cfg.AgentBin = exe
	}
	cfg.WatchdogSlack = systemd.WatchdogInterval()
	if loopHook != nil {
		cfg.LoopHook = loopHook(cfg, log)
	}
	if *holdAt != "" && *holdFile != "" {
		cfg.Hooks = holdHook(*holdAt, *holdFile, log)
	}

	if *listenAddr != "" {
		reg, m := newRegistry()
		cfg.Metrics = m
		l, err := listen(*listenAddr, newHandler(reg), log)
		if err != nil {
			return err
		}
		defer l.close() // runs after a.Close: the listener outlives the agent by no more than that
		log.Info("serving /metrics and /healthz", "addr", l.addr.String())
	}

	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	// READY only after the journal is open and config is valid: a unit
	// that is "active" has an agent able to take operations.
	if err := systemd.Ready(); err != nil {
		log.Warn("sd_notify READY failed", "err", err)
	}
	_ = systemd.Status("running; coordinator " + cfg.Coordinator)
	// Pings only while every loop of the agent makes progress: a wedged
	// loop stops them and systemd restarts the agent (docs/agent.md).
	go systemd.Watchdog(ctx, log, a.Healthy)
	log.Info("molt-agent started", "version", version.Version, "coordinator", cfg.Coordinator, "node", cfg.Node)
	err = a.Run(ctx)
	_ = systemd.Stopping()
	return err
}

// loopHook, when set, makes the agent's LoopHook. Only the fault build
// sets it (faults.go, build tag faults); production binaries have none.
var loopHook func(cfg agent.Config, log *slog.Logger) func(ctx context.Context, loop string)

// holdHook pauses at step while file exists, so a test can kill the agent
// at a known point of an operation.
func holdHook(step, file string, log *slog.Logger) agent.Hooks {
	return agent.HookFunc(func(ctx context.Context, opID, s string) error {
		if s != step {
			return nil
		}
		for {
			if _, err := os.Stat(file); err != nil {
				return nil
			}
			log.Info("test hold: paused", "op", opID, "step", s, "file", file)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}

// guard is `molt-agent guard`, run by the unit before every start from
// the binary an agent update kept (ExecStartPre, docs/agent.md): it puts
// that binary back once a new release was started MaxAgentStarts times
// without coming up. It reads only the data directory from the
// environment, and never fails the start: an error is printed, and the
// unit starts whatever binary is in place.
func guard() error {
	dir := agent.DefaultConfig().DataDir
	if d := os.Getenv("MOLT_AGENT_DATA_DIR"); d != "" {
		dir = d
	}
	if r := os.Getenv("MOLT_AGENT_HOST_ROOT"); r != "" {
		dir = filepath.Join(r, dir)
	}
	did, err := agent.Guard(dir)
	if did != "" {
		fmt.Fprintln(os.Stderr, "molt-agent guard:", did)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "molt-agent guard:", err)
	}
	return nil
}
