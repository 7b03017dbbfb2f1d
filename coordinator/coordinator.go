package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/promgate"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/trust"
)

// Coordinator is one member of the replicated coordinator.
type Coordinator struct {
	cfg   Config
	log   *slog.Logger
	sm    *statemachine.Machine
	store *raftstore.Store

	wake     chan struct{}
	dispatch *dispatcher
	live     *liveness
	// applies watches the Raft apply loop for the watchdog (watchdog.go).
	applies applyWatch

	mu       sync.Mutex
	opsCache map[string]cachedOps
	// gates evaluates PromQL health gates (Config.Gates).
	gates GateQuerier

	// peers is what the leader learnt from each member this term;
	// membersKick makes it ask again now (memberwatch.go).
	peers       peers
	membersKick chan struct{}

	// results batches agents' preflight results (preflight_results.go).
	results resultBatcher

	// autoStarted, when set (tests), is called with every start decision
	// the leader committed.
	autoStarted atomic.Pointer[func(statemachine.AutoStartCmd)]

	// runMu guards the member's lifecycle: closed is set (and quit closed)
	// by Close or Kill; running is closed when the Run in progress returns
	// (nil when none runs).
	runMu   sync.Mutex
	closed  bool
	quit    chan struct{}
	running chan struct{}
}

// New opens the member's store (bootstrapping or rejoining from disk).
func New(cfg Config) (*Coordinator, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.UTC{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = time.Second
	}
	if cfg.MissingAfter <= 0 {
		cfg.MissingAfter = 3 * cfg.HeartbeatInterval
	}
	if err := checkAuditConfig(cfg); err != nil {
		return nil, err
	}
	if cfg.MaxConcurrentWork <= 0 {
		cfg.MaxConcurrentWork = DefaultMaxConcurrentWork
	}
	if cfg.PreflightArtifactWave == 0 {
		cfg.PreflightArtifactWave = DefaultPreflightArtifactWave
	}
	if cfg.APIUnavailableTimeout <= 0 {
		cfg.APIUnavailableTimeout = DefaultAPIUnavailableTimeout
	}
	if cfg.AddonRolloutTimeout <= 0 {
		cfg.AddonRolloutTimeout = DefaultAddonRolloutTimeout
	}
	if cfg.InstanceTimeout <= 0 {
		cfg.InstanceTimeout = DefaultInstanceTimeout
	}
	if cfg.InstancePoll <= 0 {
		cfg.InstancePoll = DefaultInstancePoll
	}
	if cfg.SchedulerInterval <= 0 {
		cfg.SchedulerInterval = DefaultSchedulerInterval
	}
	if cfg.RegistrationHold == 0 {
		cfg.RegistrationHold = DefaultRegistrationHold
	}
	if cfg.CloudRetryInterval <= 0 {
		cfg.CloudRetryInterval = DefaultCloudRetryInterval
	}
	if cfg.GateInterval <= 0 {
		cfg.GateInterval = DefaultGateInterval
	}
	if cfg.Gates == nil {
		cfg.Gates = promgate.New(nil, 0)
	}
	if cfg.MemberProbeInterval <= 0 {
		cfg.MemberProbeInterval = DefaultMemberProbeInterval
	}
	c := &Coordinator{
		cfg: cfg, log: cfg.Logger, sm: statemachine.New(),
		wake:     make(chan struct{}, 1),
		dispatch: newDispatcher(),
		opsCache: map[string]cachedOps{},
		gates:    cfg.Gates,
		quit:     make(chan struct{}),

		membersKick: make(chan struct{}, 1),
	}
	c.live = newLiveness()
	c.sm.SetOnChange(c.poke)
	if cfg.Raft.Logger == nil {
		cfg.Raft.Logger = cfg.Logger.With("component", "raft")
	}
	st, err := raftstore.Open(cfg.Raft, c.sm)
	if err != nil {
		return nil, fmt.Errorf("coordinator: open store: %w", err)
	}
	c.store = st
	st.SetGate(c.gateInternal)
	if err := c.checkSealedAtStart(); err != nil {
		_ = st.Kill()
		return nil, err
	}
	if cfg.AgentCertLifetime <= 0 {
		c.cfg.AgentCertLifetime = trust.AgentCertLifetime
	}
	return c, nil
}

// Store exposes the replicated store (membership, stats).
func (c *Coordinator) Store() *raftstore.Store { return c.store }

// poke wakes the leader loop without blocking.
func (c *Coordinator) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Run follows leadership until ctx ends or the member is closed: while
// this member leads, one leadership term runs (the leader loop and the work
// it starts); when leadership is lost, the term is cancelled and Run waits
// for all of it before this member may lead again. Only one Run may be in
// progress; after Close or Kill, Run returns raftstore.ErrClosed.
func (c *Coordinator) Run(ctx context.Context) error {
	done, err := c.enterRun()
	if err != nil {
		return err
	}
	defer c.leaveRun(done)
	leaderCh := c.store.LeaderCh()
	var t *term
	stopLeading := func() {
		if t != nil {
			c.endTerm(t)
			t = nil
		}
	}
	defer stopLeading()
	if c.store.IsLeader() {
		t = c.startTerm(ctx)
	}
	// Every member writes its snapshots in the newest format every
	// member reads (memberwatch.go), as the replicated record of members
	// says; the leader also refreshes it after it asks them.
	c.refreshFormats()
	formats := time.NewTicker(c.cfg.MemberProbeInterval)
	defer formats.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.quit:
			return nil
		case <-formats.C:
			c.refreshFormats()
		case leader, ok := <-leaderCh:
			if !ok {
				return nil
			}
			if leader && t == nil {
				t = c.startTerm(ctx)
			} else if !leader {
				stopLeading()
			}
		}
	}
}

func (c *Coordinator) enterRun() (chan struct{}, error) {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("coordinator: run: %w", raftstore.ErrClosed)
	}
	if c.running != nil {
		return nil, errors.New("coordinator: Run is already running")
	}
	c.running = make(chan struct{})
	return c.running, nil
}

func (c *Coordinator) leaveRun(done chan struct{}) {
	c.runMu.Lock()
	c.running = nil
	c.runMu.Unlock()
	close(done)
}

// apply commits one command and returns the FSM's value. The command
// carries its number (statemachine.Command): there is no type to pass
// beside it, so none can mismatch it (commands.go in statemachine shows
// what a mismatched call now fails to compile with). The first command a
// request with an audit intent proposes carries the request's record in
// the same entry (audit.go).
//
// The capability gate comes first (gate.go): a command some member
// cannot read is refused (409, member-cannot-read) and nothing is
// written.
func (c *Coordinator) apply(ctx context.Context, cmd statemachine.Command) (any, error) {
	if err := c.checkReadable(needOf(cmd)); err != nil {
		return nil, err
	}
	if in := AuditIntentFrom(ctx); in != nil && !in.Recorded() && !in.Skipped() && statemachine.Auditable(cmd.Type()) {
		return c.applyAudited(ctx, in, cmd)
	}
	return c.applyBare(ctx, cmd)
}

// applyBare commits one command as it is.
func (c *Coordinator) applyBare(ctx context.Context, cmd statemachine.Command) (any, error) {
	start := time.Now()
	v, err := c.store.Apply(ctx, cmd)
	var refused *raftstore.RefusedError
	if errors.As(err, &refused) {
		// A refusal that reached the log: the service methods check what
		// they can before proposing, so this is a race (a stale decision)
		// or a check they lack.
		c.log.Info("command refused", "err", err)
	}
	if c.cfg.Recorder != nil && err == nil {
		c.cfg.Recorder.RaftCommit(time.Since(start))
	}
	return v, err
}

// Close shuts the member down gracefully: Run returns (its leadership term,
// if any, cancelled and waited for), then the store hands leadership to a
// peer and closes. Safe whether or not Run is running, and more than once.
func (c *Coordinator) Close() error {
	c.stopRun()
	return c.store.Close()
}

// Kill stops the member abruptly, as a crash would (tests). The leader's
// goroutines are still cancelled and waited for, so none outlives it.
func (c *Coordinator) Kill() error {
	c.stopRun()
	return c.store.Kill()
}

// stopRun makes Run return and waits until it has (with it, every goroutine
// of its leadership term); later calls of Run return at once.
func (c *Coordinator) stopRun() {
	c.runMu.Lock()
	if !c.closed {
		c.closed = true
		close(c.quit)
	}
	done := c.running
	c.runMu.Unlock()
	if done != nil {
		<-done
	}
}

// IsLeader reports whether this member leads.
func (c *Coordinator) IsLeader() bool { return c.store.IsLeader() }

func isStale(err error) bool { return err != nil && errors.Is(err, phases.ErrStale) }
