package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/internal/progress"
	"github.com/moltproject/molt/trust"
)

// ErrConfig is wrapped by New's errors.
var ErrConfig = errors.New("agent: invalid config")

// Agent is one host's agent. Create it with New and start it with Run.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	clock   Clock
	client  *client.Client
	http    *http.Client
	apiHTTP *http.Client // a.client's
	// apiTransport is apiHTTP's; renewed with the certificate.
	apiTransport *renewingTransport
	creds        *credentials
	journal      *journal
	runtime      Runtime
	pods         PodObserver
	hooks        Hooks
	metrics      Metrics
	stage        *stage
	// loops records the progress of the agent's loops (watchdog.go).
	loops *progress.Loops

	kick chan struct{} // asks the heartbeat loop to send now
	// upgradeNamed is whether the last poll answer named the cluster's
	// upgrade in progress (api.OperationsResponse.Upgrade present): the
	// coordinator is recent enough to say, so a CheckArtifacts of no
	// upgrade is a dry run and keeps nothing (stageKeeps).
	upgradeNamed atomic.Bool

	mu        sync.Mutex
	heartbeat time.Duration // may be changed by the coordinator at Register
	verCache  versionCache
}

// New validates cfg, opens the journal and returns an agent. It does not
// contact the coordinator; Run does.
func New(cfg Config) (*Agent, error) {
	if cfg.Coordinator == "" || cfg.Cluster == "" || cfg.Node == "" {
		return nil, fmt.Errorf("%w: coordinator, cluster and node are required", ErrConfig)
	}
	endpoints, err := client.ParseEndpoints(cfg.Coordinator)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if cfg.HostRoot == "" || cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: host root and data dir are required", ErrConfig)
	}
	if cfg.HeartbeatInterval <= 0 || cfg.HealthTimeout <= 0 || cfg.PollWait <= 0 || cfg.RetryMin <= 0 {
		return nil, fmt.Errorf("%w: intervals and timeouts must be positive (start from DefaultConfig)", ErrConfig)
	}
	if cfg.StageMaxBytes < 0 {
		return nil, fmt.Errorf("%w: the stage bound must not be negative (0 turns staging off)", ErrConfig)
	}
	a := &Agent{
		cfg:       cfg,
		log:       cfg.Logger,
		clock:     cfg.Clock,
		runtime:   cfg.Runtime,
		pods:      cfg.Pods,
		hooks:     cfg.Hooks,
		metrics:   cfg.Metrics,
		kick:      make(chan struct{}, 1),
		heartbeat: cfg.HeartbeatInterval,
	}
	if a.log == nil {
		a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a.log = a.log.With("cluster", cfg.Cluster, "node", cfg.Node)
	if a.clock == nil {
		a.clock = clock.Real{}
	}
	if a.metrics == nil {
		a.metrics = nopMetrics{}
	}
	if a.runtime == nil {
		a.runtime = newContainerdRuntime(a.path(cfg.ContainerdSocket), cfg.Snapshotter)
	}
	if a.pods == nil {
		a.pods = a.runtime
	}
	if cfg.CAPin != "" {
		if _, err := trust.ParsePin(cfg.CAPin); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	if cfg.BootstrapToken != "" {
		if _, _, err := trust.ParseToken(cfg.BootstrapToken); err != nil {
			return nil, fmt.Errorf("%w: bootstrap %w", ErrConfig, err)
		}
	}
	a.creds = newCredentials(a.dataPath("tls"))
	a.http = &http.Client{Transport: a.creds.transport()}
	// The coordinator's client notices a member that stops answering
	// (frozen or cut off) within seconds and goes on to the next one;
	// artifact downloads keep their own deadline (DownloadTimeout).
	a.apiTransport = newRenewingTransport(func() *http.Transport { return client.ConfigureTransport(a.creds.transport()) })
	a.apiHTTP = &http.Client{Transport: a.apiTransport}
	a.client = client.NewEndpoints(endpoints, a.apiHTTP)
	// Every agent of a fleet is given the same list of members; each
	// starts at the member its node name hashes to, so the fleet's beats
	// and long polls are shared among the members (a follower relays the
	// beats that change nothing in batches, docs/ha.md).
	a.client.SpreadBy(cfg.Cluster + "/" + cfg.Node)
	j, err := openJournal(a.dataPath("journal.jsonl"), a.clock.Now)
	if err != nil {
		return nil, err
	}
	a.journal = j
	if err := a.confirmSelfUpdate(); err != nil {
		a.log.Warn("cannot confirm the agent's update record", "err", err)
	}
	a.stage = openStage(a.dataPath("stage"), cfg.StageMaxBytes, a.clock.Now, a.log)
	a.loops = progress.New(a.clock.Now, cfg.WatchdogSlack)
	return a, nil
}

// Close releases the journal and the containerd connection.
func (a *Agent) Close() error {
	if c, ok := a.runtime.(io.Closer); ok {
		_ = c.Close()
	}
	return a.journal.close()
}

// path joins a host path under HostRoot.
func (a *Agent) path(p string) string { return filepath.Join(a.cfg.HostRoot, p) }

// dataPath joins elements under the (host-rooted) data directory.
func (a *Agent) dataPath(elem ...string) string {
	return filepath.Join(append([]string{a.path(a.cfg.DataDir)}, elem...)...)
}

// Run registers, then heartbeats and executes operations until ctx ends.
// Unfinished operations from the journal are resumed first. It returns
// nil when ctx ends and an error only when the agent must stop — a hook
// aborted an operation, or the journal cannot be written.
func (a *Agent) Run(ctx context.Context) error {
	a.loops.Watch(LoopMain, a.mainBound())
	defer a.loops.Forget(LoopMain)
	if err := a.ensureCredentials(ctx); err != nil {
		if errors.Is(err, ErrConfig) {
			return err
		}
		return nil //nolint:nilerr // only ctx ends enrollment
	}
	rotCtx, stopRot := context.WithCancel(ctx)
	var rot sync.WaitGroup
	rot.Add(1)
	go func() { defer rot.Done(); a.rotate(rotCtx) }()
	defer func() { stopRot(); rot.Wait() }()
	if err := a.register(ctx); err != nil {
		return nil //nolint:nilerr // only ctx ends the registration loop
	}
	hbCtx, stopHB := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a.heartbeatLoop(hbCtx) }()
	defer func() { stopHB(); wg.Wait() }()

	unfinished, unreported := a.journal.pending()
	for _, r := range unreported {
		a.report(ctx, r)
	}
	for _, op := range unfinished {
		a.log.Info("resuming operation after restart", "op", op.ID, "kind", op.Kind)
		if err := a.handle(ctx, op); err != nil {
			return err
		}
	}

	retry := a.cfg.RetryMin
	for ctx.Err() == nil {
		a.loopTop(ctx, LoopMain)
		pctx, cancel := context.WithTimeout(ctx, a.pollTimeout())
		resp, err := a.client.Poll(pctx, a.cfg.Cluster, a.cfg.Node, a.cfg.PollWait)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			a.log.Warn("poll for operations failed; retrying", "err", err, "in", retry)
			retry = a.sleep(ctx, retry)
			continue
		}
		retry = a.cfg.RetryMin
		a.noteUpgrade(resp.Upgrade)
		for _, op := range resp.Operations {
			if err := a.handle(ctx, op); err != nil {
				return err
			}
		}
	}
	return nil
}

// noteUpgrade applies what a poll answer says of the cluster's upgrade in
// progress to the stage: none, or another than the one the stage was
// filled for, empties it. An answer without the field comes from a
// coordinator that predates it and says nothing: the stage is left as it
// is — never emptied on a guess, which could be mid-upgrade — and stays
// within StageMaxBytes, its oldest entries giving way to new ones.
func (a *Agent) noteUpgrade(upgrade *string) {
	a.upgradeNamed.Store(upgrade != nil)
	if upgrade != nil {
		a.stage.upgradeInProgress(*upgrade)
	}
}

// stageKeeps reports whether a CheckArtifacts keeps what it verified: when
// it belongs to an upgrade, or when the coordinator does not say
// (Operation.Upgrade and OperationsResponse.Upgrade are both newer than
// it; then what is kept is bounded, and evicted oldest first). A check of
// no upgrade from a coordinator that names upgrades — a preflight run on
// its own — stays a dry run. (A check resumed after a restart, before any
// poll, keeps what it verifies; the next answer empties the stage if no
// upgrade is in progress.)
func (a *Agent) stageKeeps(op api.Operation) bool {
	return a.stage.on() && (op.Upgrade != "" || !a.upgradeNamed.Load())
}

// handle executes (or re-reports) one operation and reports its result.
func (a *Agent) handle(ctx context.Context, op api.Operation) error {
	a.loops.Busy(LoopMain)
	res, err := a.execute(ctx, op)
	a.loops.Beat(LoopMain)
	if err != nil {
		if errors.Is(err, errStopped) || ctx.Err() != nil {
			return nil // ctx ended mid-operation; the journal resumes it
		}
		return err
	}
	if res.ID == "" {
		return nil
	}
	a.report(ctx, res)
	select {
	case a.kick <- struct{}{}:
	default:
	}
	return nil
}

// register calls Register until it succeeds or ctx ends.
func (a *Agent) register(ctx context.Context) error {
	retry := a.cfg.RetryMin
	for {
		a.loopTop(ctx, LoopMain)
		rctx, cancel := withRequestTimeout(ctx)
		resp, err := a.client.Register(rctx, api.RegisterRequest{
			Cluster: a.cfg.Cluster, Node: a.cfg.Node,
			Address: a.cfg.Address, AgentVersion: a.cfg.Version,
		})
		cancel()
		if err == nil {
			if resp.HeartbeatIntervalSeconds > 0 {
				a.mu.Lock()
				a.heartbeat = time.Duration(resp.HeartbeatIntervalSeconds) * time.Second
				a.mu.Unlock()
			}
			a.log.Info("registered with coordinator", "coordinator", a.client.Base())
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.log.Warn("register failed; retrying", "err", err, "in", retry)
		retry = a.sleep(ctx, retry)
	}
}

// report sends a result until the coordinator takes it (or refuses it for
// good with a 4xx), then journals that it was reported.
func (a *Agent) report(ctx context.Context, r api.OperationResult) {
	retry := a.cfg.RetryMin
	for ctx.Err() == nil {
		a.loopTop(ctx, LoopMain)
		rctx, cancel := withRequestTimeout(ctx)
		err := a.client.ReportResult(rctx, a.cfg.Cluster, a.cfg.Node, r)
		cancel()
		var p *api.Problem
		if err == nil || (errors.As(err, &p) && p.Status >= 400 && p.Status < 500) {
			if err != nil {
				a.log.Error("coordinator refused result", "op", r.ID, "err", err)
			}
			if r.State != api.OpRunning {
				if jerr := a.journal.append(record{ID: r.ID, Step: StepReported}); jerr != nil {
					a.log.Error("journal", "err", jerr)
				}
			}
			return
		}
		a.log.Warn("report result failed; retrying", "op", r.ID, "err", err, "in", retry)
		retry = a.sleep(ctx, retry)
	}
}

// sleep waits about d (with jitter, so a fleet does not retry in step)
// and returns the next, doubled, backoff.
func (a *Agent) sleep(ctx context.Context, d time.Duration) time.Duration {
	j := d/2 + time.Duration(rand.Int64N(int64(d)/2+1))
	select {
	case <-ctx.Done():
	case <-a.clock.After(j):
	}
	return min(2*d, a.cfg.RetryMax)
}

// heartbeatLoop samples health every HealthCheckInterval and sends it when
// it changed, when an operation finished, or when HeartbeatInterval passed.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	a.loops.Watch(LoopHeartbeat, a.heartbeatBound())
	defer a.loops.Forget(LoopHeartbeat)
	var lastSent time.Time
	var lastBody []byte
	failures := 0
	for {
		a.loopTop(ctx, LoopHeartbeat)
		h := a.Health(ctx)
		body, _ := json.Marshal(h)
		a.mu.Lock()
		every := a.heartbeat
		a.mu.Unlock()
		if lastBody == nil || string(body) != string(lastBody) || a.clock.Now().Sub(lastSent) >= every {
			h.Time = a.clock.Now()
			rctx, cancel := withRequestTimeout(ctx)
			err := a.client.Heartbeat(rctx, h)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				a.metrics.HeartbeatFailed()
				a.log.Warn("heartbeat failed", "err", err)
				failures++
			} else {
				lastSent, lastBody = a.clock.Now(), body
				a.metrics.HeartbeatSucceeded(lastSent)
				failures = 0
			}
		}
		wait := beatWait(failures, a.cfg.HealthCheckInterval, every, rand.Int64N)
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
		case <-a.clock.After(wait):
		}
	}
}

// beatWait is how long the heartbeat loop waits before it looks again:
// the health-check interval (at most the heartbeat interval) while beats
// get through; after failures in a row, that doubled per failure up to
// the heartbeat interval, with jitter (half to all of it, randn picks).
// A fleet whose coordinator is unreachable (a leader change under load,
// a network cut) then comes back no more often than it beats, spread
// out, instead of every agent sending every 2 s in step: 15,000 agents
// would be 7,500 requests a second, each a new connection, at members
// that are recovering. A beat is still tried once per heartbeat interval,
// so an agent that gets through is not late for MissingAfter.
func beatWait(failures int, check, every time.Duration, randn func(int64) int64) time.Duration {
	d := min(check, every)
	if failures == 0 {
		return d
	}
	for i := 0; i < failures && d < every; i++ {
		d *= 2
	}
	d = min(d, every)
	return d/2 + time.Duration(randn(int64(d/2)+1))
}
