// Command agentload measures a coordinator of three molt-coordinator
// processes under the heartbeats of many agents, as a fleet would send
// them (docs/performance.md, row P2 at 15,000 agents): the agents run in
// worker processes of this binary (-agents-per-worker each, workers.go),
// the members in their own, so neither's CPU, memory or file limits are
// the other's.
//
// It starts three members on loopback (the first bootstraps, the others
// join it), registers a cluster of -agents nodes, enrolls one agent per
// node with its own key and certificate through a bootstrap token, and
// runs every agent as molt-agent does: one kept mutual-TLS HTTP/2
// connection, a heartbeat every -interval, a long poll for operations.
// Agents are spread over the members by their node name, as molt-agent
// spreads them (agent.startEndpoint). After -warmup it measures for
// -duration: each beat's latency by the member that answered it (leader
// or follower), each member's RSS (its highest), the Raft entries the
// leader committed, and the leader changes. It prints the rows and
// writes them as JSON to -out.
//
// Each agent starts beating as soon as it is registered, as molt-agent
// does, and enrolls and registers again after a failure with a jittered
// backoff; the workers print their progress every 10 s (registered
// agents, beats answered and failed, the latest failure).
//
// Usage: agentload -coordinator-bin bin/molt-coordinator [-agents 15000]
// [-agents-per-worker 5000] [-interval 10s] [-warmup 1m] [-duration 2m]
// [-dir DIR] [-out FILE]
//
// It raises its open-file limit to the hard limit (members inherit it);
// 15,000 agents need more than 15,000 descriptors here and about a third
// of that in each member (the packaged units set LimitNOFILE).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("coordinator-bin", "bin/molt-coordinator", "the molt-coordinator binary to run three members of")
	agents := flag.Int("agents", 15000, "agents, one per node")
	interval := flag.Duration("interval", 10*time.Second, "each agent's heartbeat interval")
	pollWait := flag.Duration("poll-wait", 30*time.Second, "each agent's long poll")
	warmup := flag.Duration("warmup", time.Minute, "how long the agents run before the measurement")
	duration := flag.Duration("duration", 2*time.Minute, "how long the measurement lasts")
	dir := flag.String("dir", "", "the members' data directories (default: a new temporary directory, removed after)")
	out := flag.String("out", "", "write the results as JSON here too")
	perWorker := flag.Int("agents-per-worker", 5000, "agents in one worker process (each holds a connection per agent)")
	workerName := flag.String("worker", "", "run as a worker process of the parent named so (internal)")
	flag.Parse()
	if *workerName != "" {
		raiseFileLimit()
		if err := runWorker(*workerName); err != nil {
			log.Fatalf("agentload %s: %v", *workerName, err)
		}
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	limit := raiseFileLimit()
	work := *dir
	if work == "" {
		d, err := os.MkdirTemp("", "agentload-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		work = d
	}
	res, err := run(ctx, config{bin: *bin, agents: *agents, interval: *interval, pollWait: *pollWait,
		warmup: *warmup, duration: *duration, dir: work, fileLimit: limit, perWorker: max(*perWorker, 1)})
	if err != nil {
		log.Fatalf("agentload: %v", err)
	}
	res.print(os.Stdout)
	if *out != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// config is one run's parameters.
type config struct {
	bin                string
	agents             int
	interval, pollWait time.Duration
	warmup, duration   time.Duration
	dir                string
	fileLimit          uint64
	perWorker          int
}

// raiseFileLimit sets this process's soft open-file limit to its hard
// limit and returns it; the members started later inherit it.
func raiseFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		log.Fatal(err)
	}
	// Root may raise the hard limit too, as a unit's LimitNOFILE does: the
	// agents' kept connections, the ones being set up and this process's
	// own requests need more than one descriptor an agent, and a hard
	// limit of 20,000 ran out at 15,000 agents.
	if want := uint64(1 << 20); l.Max < want {
		raised := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			return want
		}
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		log.Fatal(err)
	}
	return l.Cur
}

// run is one measurement: members up, cluster and agents in place, the
// agents beating, the figures taken, everything stopped.
func run(ctx context.Context, cfg config) (*results, error) {
	bin, err := filepath.Abs(cfg.bin)
	if err != nil {
		return nil, err
	}
	co, err := startMembers(ctx, bin, cfg.dir)
	if err != nil {
		return nil, err
	}
	defer co.stop()
	logf("3 members up; registering a cluster of %d nodes", cfg.agents)
	nodes, err := co.registerCluster(ctx, "load", cfg.agents)
	if err != nil {
		return nil, err
	}
	token, err := co.bootstrapToken(ctx, "load", len(nodes))
	if err != nil {
		return nil, fmt.Errorf("bootstrap token: %w", err)
	}
	start := time.Now()
	ws, err := startWorkers(ctx, workerSpec{Endpoints: co.endpoints(), CA: co.caPEM, Token: token, Cluster: "load",
		Interval: cfg.interval, PollWait: cfg.pollWait}, nodes, cfg.perWorker)
	defer stopWorkers(ws)
	if err != nil {
		return nil, err
	}
	logf("every agent enrolled, registered and beating after %s, in %d worker processes; warming up for %s", time.Since(start).Round(time.Second), len(ws), cfg.warmup)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(cfg.warmup):
	}
	before, err := co.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if err := tell(ws, "measure"); err != nil {
		return nil, err
	}
	peak := co.watchRSS(ctx, cfg.duration)
	rep, err := collect(ws)
	if err != nil {
		return nil, err
	}
	after, err := co.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return summarize(cfg, co, len(nodes), rep, before, after, peak), nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[agentload %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
