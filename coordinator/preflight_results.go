package coordinator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
)

// Group commit of preflight results: at 15,000 hosts a run collects
// 30,000 results in a few seconds, and an entry each made the log the
// bottleneck (a Raft round trip and an fsync per result). An agent's
// result is still acknowledged only once an entry holding it applied, but
// results that arrive while an entry is in flight wait together and go
// in the next one. One result alone goes at once, as before: there is no
// timer and no added latency, only fewer entries under load.

// maxResultBatch bounds one batch entry, in results and in bytes (an
// estimate of the encoded size), well under the 1 MB an entry may take.
const (
	maxResultBatch      = 1000
	maxResultBatchBytes = 512 << 10
)

// pendingResult is one agent's result waiting for an entry.
type pendingResult struct {
	cmd  statemachine.PreflightResultCmd
	done chan error
}

// resultBatcher gathers preflight results into PreflightResultsCmd
// entries (submit).
type resultBatcher struct {
	mu       sync.Mutex
	pending  []pendingResult
	flushing bool
}

// reportPreflightResult commits an agent's result of a preflight
// operation, batched with the results that arrive with it.
func (c *Coordinator) reportPreflightResult(ctx context.Context, cluster, node string, r api.OperationResult) error {
	run := c.sm.PreflightOfOperation(cluster, r.ID)
	if run == "" {
		return &RuleError{Rule: "operation-id", Detail: fmt.Sprintf("no preflight run has operation %s", r.ID), Err: ErrNotFound}
	}
	cmd := statemachine.PreflightResultCmd{Cluster: cluster, Run: run, Node: node, Result: r}
	if c.checkReadable(needOf(statemachine.PreflightResultsCmd{})) != nil {
		// A member before 0.2.0 cannot read a batch: one entry each.
		_, err := c.apply(ctx, cmd)
		return resultErr(err)
	}
	return c.results.submit(ctx, cmd, func(batch statemachine.PreflightResultsCmd) ([]error, error) {
		batch.Now = c.cfg.Clock.Now()
		ctx, cancel := context.WithTimeout(context.Background(), resultBatchTimeout)
		defer cancel()
		v, err := c.apply(ctx, batch)
		errs, _ := v.([]error)
		return errs, err
	})
}

// commitFunc commits one batch entry: the error of each result (nil for
// one recorded), or the error of the whole entry.
type commitFunc func(statemachine.PreflightResultsCmd) ([]error, error)

// submit adds cmd to the next batch and returns its own answer. The
// first caller that finds no batch in flight commits the pending results,
// a batch at a time, until none is left; the others wait. The commit runs
// with a context of its own: a batch carries other agents' results, which
// one agent's cancelled request must not abandon.
func (b *resultBatcher) submit(ctx context.Context, cmd statemachine.PreflightResultCmd, commit commitFunc) error {
	p := pendingResult{cmd: cmd, done: make(chan error, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, p)
	flush := !b.flushing
	b.flushing = true
	b.mu.Unlock()
	if flush {
		b.flush(commit)
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		// The result may still be committed; an agent reports again,
		// and a second report of a recorded result is acknowledged.
		return ctx.Err()
	}
}

// next takes the next batch off the pending results: at most
// maxResultBatch results and about maxResultBatchBytes (one result
// always goes, whatever its size). It clears flushing when none is left.
func (b *resultBatcher) next() []pendingResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, size := 0, 0
	for n < len(b.pending) && n < maxResultBatch {
		sz := resultSize(b.pending[n].cmd)
		if n > 0 && size+sz > maxResultBatchBytes {
			break
		}
		size += sz
		n++
	}
	if n == 0 {
		b.flushing = false
		return nil
	}
	batch := b.pending[:n:n]
	b.pending = b.pending[n:]
	return batch
}

func (b *resultBatcher) flush(commit commitFunc) {
	for batch := b.next(); batch != nil; batch = b.next() {
		cmd := statemachine.PreflightResultsCmd{Results: make([]statemachine.PreflightResultCmd, len(batch))}
		for i, p := range batch {
			cmd.Results[i] = p.cmd
		}
		errs, err := commit(cmd)
		for i, p := range batch {
			switch {
			case err != nil:
				p.done <- err
			case i < len(errs):
				p.done <- resultErr(errs[i])
			default:
				p.done <- nil
			}
		}
	}
}

// resultBatchTimeout bounds one batch entry's commit.
const resultBatchTimeout = 30 * time.Second

// resultErr is what the agent is told of its result: a result already
// recorded (stale) is acknowledged.
func resultErr(err error) error {
	if isStale(err) {
		return nil
	}
	return err
}

// resultSize estimates a result's encoded size in a batch entry.
func resultSize(c statemachine.PreflightResultCmd) int {
	n := 200 + len(c.Cluster) + len(c.Run) + len(c.Node) + len(c.Result.ID) + len(c.Result.Kind) + len(c.Result.Message)
	for k, v := range c.Result.Details {
		n += len(k) + len(v) + 6
	}
	return n
}
