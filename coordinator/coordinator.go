package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
)

// Coordinator is one member of the replicated coordinator.
type Coordinator struct {
	cfg   Config
	log   *slog.Logger
	fsm   *fsm
	store *raftstore.Store

	wake     chan struct{}
	dispatch *dispatcher
	live     *liveness

	mu       sync.Mutex
	inflight map[string]bool
	opsCache map[string]cachedOps
}

type cachedOps struct {
	kubeconfig string
	ops        ClusterOps
}

// New opens the member's store (bootstrapping or rejoining from disk).
func New(cfg Config) (*Coordinator, error) {
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
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
	c := &Coordinator{
		cfg: cfg, log: cfg.Logger, fsm: newFSM(),
		wake:     make(chan struct{}, 1),
		dispatch: newDispatcher(),
		inflight: map[string]bool{},
		opsCache: map[string]cachedOps{},
	}
	c.live = newLiveness()
	c.fsm.onChange = c.poke
	if cfg.Raft.Logger == nil {
		cfg.Raft.Logger = cfg.Logger.With("component", "raft")
	}
	st, err := raftstore.Open(cfg.Raft, c.fsm)
	if err != nil {
		return nil, fmt.Errorf("coordinator: open store: %w", err)
	}
	c.store = st
	if cfg.AgentToken == "" {
		c.log.Warn("no agent join token configured: any agent may register")
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

// Run follows leadership until ctx ends: while this member leads, the
// leader loop runs; when it loses leadership, all leader work stops.
func (c *Coordinator) Run(ctx context.Context) error {
	leaderCh := c.store.LeaderCh()
	var stop context.CancelFunc
	var done chan struct{}
	stopLeading := func() {
		if stop != nil {
			stop()
			<-done
			stop = nil
		}
	}
	defer stopLeading()
	if c.store.IsLeader() {
		stop, done = c.startLeading(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case leader, ok := <-leaderCh:
			if !ok {
				return nil
			}
			if leader && stop == nil {
				stop, done = c.startLeading(ctx)
			} else if !leader {
				stopLeading()
			}
		}
	}
}

func (c *Coordinator) startLeading(parent context.Context) (context.CancelFunc, chan struct{}) {
	ctx, cancel := context.WithCancel(parent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.lead(ctx)
	}()
	return cancel, done
}

// lead is the leader loop: a barrier so the replica has applied every
// committed entry, then a tick on every change and every TickInterval.
func (c *Coordinator) lead(ctx context.Context) {
	log := c.log.With("role", "leader")
	for {
		if err := c.store.Barrier(ctx); err == nil {
			break
		} else if ctx.Err() != nil {
			return
		} else {
			log.Warn("barrier failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.live.reset(c.cfg.Clock.Now())
	if c.cfg.Recorder != nil {
		c.cfg.Recorder.LeaderChange()
	}
	log.Info("leading")
	t := time.NewTicker(c.cfg.TickInterval)
	defer t.Stop()
	defer c.dispatch.clear()
	for {
		again := c.tick(ctx)
		if again {
			continue
		}
		select {
		case <-ctx.Done():
			log.Info("no longer leading")
			return
		case <-c.wake:
		case <-t.C:
		}
	}
}

// apply commits one command and returns the FSM's value.
func (c *Coordinator) apply(ctx context.Context, t raftstore.CommandType, body any) (any, error) {
	start := time.Now()
	v, err := c.store.Apply(ctx, t, body)
	if c.cfg.Recorder != nil && err == nil {
		c.cfg.Recorder.RaftCommit(time.Since(start))
	}
	return v, err
}

// Close shuts the member down gracefully.
func (c *Coordinator) Close() error { return c.store.Close() }

// Kill stops the member abruptly, as a crash would (tests).
func (c *Coordinator) Kill() error { return c.store.Kill() }

// IsLeader reports whether this member leads.
func (c *Coordinator) IsLeader() bool { return c.store.IsLeader() }

func isStale(err error) bool { return err != nil && errors.Is(err, phases.ErrStale) }
