package raftstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/moltproject/molt/raftstore/command"
)

// Apply commits one command and returns what its ApplyFunc returned. Only the
// leader accepts writes: elsewhere it returns ErrNotLeader and the caller
// forwards to Store.Leader. A domain refusal comes back wrapped, so
// errors.Is(err, domainSentinel) holds; the refused entry is still in the log
// and was refused identically on every replica.
//
// The wait is bounded by ctx and Config.ApplyTimeout. On ErrTimeout or
// ErrLeadershipLost the command may or may not have been applied; commands
// that carry their expected version can be retried safely.
//
// The command carries its own type (Command.Type), so a body cannot be
// proposed under another command's number.
func (s *Store) Apply(ctx context.Context, c Command) (any, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil command", ErrBadCommand)
	}
	t := c.Type()
	if t.Internal() {
		return nil, fmt.Errorf("%w: type %s is reserved for raftstore", ErrUnknownCommand, t)
	}
	if _, ok := s.fsm.handlers[t]; !ok {
		// Refuse before writing: an entry no handler knows would make every
		// replica halt (or, flagged, be skipped and do nothing).
		return nil, fmt.Errorf("%w: %s", ErrUnknownCommand, t)
	}
	return s.propose(ctx, c)
}

// propose frames and commits a command, raftstore's own included.
func (s *Store) propose(ctx context.Context, c Command) (any, error) {
	t := c.Type()
	b, err := Encode(c)
	if err != nil {
		return nil, err
	}
	if err := s.checkServing(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		// Do not append what the caller has already given up on.
		return nil, fmt.Errorf("raftstore: apply %s: %w: %w", t, ErrTimeout, err)
	}
	minVersion := s.minVersion(c)
	if g := s.gate.Load(); g != nil {
		if err := (*g)(c, minVersion); err != nil {
			return nil, err
		}
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	// The entry carries the lowest release that reads it, for a member
	// too old to read it to name (HaltInfo.NeedsVersion).
	f := s.raft.ApplyLog(raft.Log{Data: b, Extensions: command.EncodeExtensions(minVersion)}, remaining(ctx))
	if err := s.wait(ctx, f); err != nil {
		return nil, fmt.Errorf("raftstore: apply %s: %w", t, err)
	}
	switch r := f.Response().(type) {
	case applyResult:
		if r.Err != nil {
			return r.Value, &RefusedError{Type: t, Index: f.Index(), Err: r.Err}
		}
		return r.Value, nil
	case nil: // an IgnoreUnknown entry skipped by the FSM
		return nil, nil
	default:
		return nil, fmt.Errorf("raftstore: unexpected FSM response %T", r)
	}
}

// RefusedError is a command the FSM refused: it is in the log at Index
// and was refused identically on every replica. Its message names the
// command and index, for logs; Err is the domain refusal, the part a
// client is shown.
type RefusedError struct {
	Type  CommandType
	Index uint64
	Err   error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("raftstore: command %s at index %d refused: %v", e.Type, e.Index, e.Err)
}

// Unwrap returns the domain refusal.
func (e *RefusedError) Unwrap() error { return e.Err }

// Barrier waits until every entry committed before it has been applied to
// this leader's FSM. A new leader calls it before trusting its state.
func (s *Store) Barrier(ctx context.Context) error {
	if err := s.checkServing(); err != nil {
		return err
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if err := s.wait(ctx, s.raft.Barrier(remaining(ctx))); err != nil {
		return fmt.Errorf("raftstore: barrier: %w", err)
	}
	return nil
}

// ReadIndex returns an index that covers every command whose Apply had
// returned when ReadIndex was called, on any member: a member that has
// applied it reads state no older than that (the read index of the Raft
// thesis, §6.4). Only the leader answers. It confirms that it still leads
// (VerifyLeader: one round of heartbeats to a quorum, nothing written to
// the log), so a deposed leader cannot answer with an index that misses
// its successor's writes, and returns what its FSM has applied: every
// write acknowledged in its term was applied here before Apply returned.
// A leader new in its term may not yet have applied what its predecessor
// acknowledged, so the first ReadIndex of a term waits for a Barrier.
func (s *Store) ReadIndex(ctx context.Context) (uint64, error) {
	if err := s.checkServing(); err != nil {
		return 0, err
	}
	term := s.raft.CurrentTerm()
	if s.barrierTerm.Load() != term {
		if err := s.Barrier(ctx); err != nil {
			return 0, err
		}
		s.barrierTerm.Store(term)
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	if err := s.wait(ctx, s.raft.VerifyLeader()); err != nil {
		return 0, fmt.Errorf("raftstore: read index: %w", err)
	}
	return s.fsm.applied.Load(), nil
}

// checkLeader fails fast with ErrClosed or ErrNotLeader. It names the leader
// in the message (the errors.Is target stays ErrNotLeader).
func (s *Store) checkLeader() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if s.raft.State() != raft.Leader {
		if id, _, httpAddr := s.Leader(); id != "" {
			return fmt.Errorf("%w (leader %s at %q)", ErrNotLeader, id, httpAddr)
		}
		return fmt.Errorf("%w (%w)", ErrNotLeader, ErrLeaderNotFound)
	}
	return nil
}

// checkServing is checkLeader for what a leader does from its state
// (writes, barriers, reads): a halted member does none of them, leader
// or not (Store.Halted).
func (s *Store) checkServing() error {
	if err := s.checkLeader(); err != nil {
		return err
	}
	if h, halted := s.Halted(); halted {
		return fmt.Errorf("%w: %s", ErrHalted, h)
	}
	return nil
}

// withTimeout bounds ctx by Config.ApplyTimeout.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.ApplyTimeout)
}

// remaining is the time left before ctx's deadline, for Raft's enqueue
// timeouts; 0 (no limit) when there is none.
func remaining(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	if r := time.Until(d); r > 0 {
		return r
	}
	return time.Nanosecond
}

// wait waits for a Raft future or ctx. Raft futures cannot be cancelled, so
// the waiting goroutine outlives a cancelled ctx until Raft answers; Raft
// answers every future, at the latest on shutdown.
func (s *Store) wait(ctx context.Context, f raft.Future) error {
	errCh := make(chan error, 1)
	go func() { errCh <- f.Error() }()
	select {
	case err := <-errCh:
		return mapRaftErr(err)
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
	}
}

// mapRaftErr turns hashicorp/raft's errors into this package's sentinels,
// keeping the original in the chain.
func mapRaftErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// Refused before anything was appended: safe to forward.
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %w", ErrLeadershipLost, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	default:
		return err
	}
}
