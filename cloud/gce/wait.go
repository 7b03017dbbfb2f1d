package gce

import (
	"context"
	"fmt"

	compute "google.golang.org/api/compute/v1"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/internal/clock"
)

// Clock reads the time and paces the polling of operations, so tests can
// run a five-minute deadline in no time.
type Clock = clock.Clock

// do finishes a mutating call: it classifies the call's error, or waits
// for its operation to be DONE and classifies the operation's error.
func (p *Provider) do(ctx context.Context, call string, op *compute.Operation, err error) error {
	if err != nil {
		return classify(ctx, call, err)
	}
	return p.wait(ctx, call, op)
}

// wait polls op (ZoneOperations.Wait, or GlobalOperations.Wait for a
// global one) until it is DONE, pausing PollInterval between two polls
// that return early. Past OperationTimeout it returns an error wrapping
// cloud.ErrTransient: the operation may still finish, and the caller's
// retry with the same request ID gets the same operation back.
func (p *Provider) wait(ctx context.Context, call string, op *compute.Operation) error {
	deadline := p.clock.Now().Add(p.timeout)
	wctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	for i := 0; op.Status != "DONE"; i++ {
		if i > 0 {
			select {
			case <-p.clock.After(p.poll):
			case <-wctx.Done():
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("gce: %s: waiting for operation %s: %w", call, op.Name, ctx.Err())
		}
		if wctx.Err() != nil || !p.clock.Now().Before(deadline) {
			return &Error{Call: call, Message: fmt.Sprintf("operation %s still %s after %s", op.Name, op.Status, p.timeout), Kind: cloud.ErrTransient}
		}
		var next *compute.Operation
		var err error
		if op.Zone != "" {
			next, err = p.svc.ZoneOperations.Wait(p.project, lastSegment(op.Zone), op.Name).Context(wctx).Do()
		} else {
			next, err = p.svc.GlobalOperations.Wait(p.project, op.Name).Context(wctx).Do()
		}
		if err != nil {
			if cerr := classify(wctx, call, err); isTransient(cerr) && wctx.Err() == nil {
				continue // the poll failed, not the operation: poll again
			}
			if wctx.Err() != nil && ctx.Err() == nil {
				continue // the deadline check above reports it
			}
			// The poll failed for good (the operation is gone, the
			// credentials may not read it): the operation's outcome is
			// unknown, so it is not its error. A retry with the same
			// request ID finds the operation again, if it exists.
			perr := classify(ctx, "operations.wait", err)
			if ctx.Err() != nil {
				return perr
			}
			return &Error{Call: call, Message: fmt.Sprintf("polling operation %s: %v", op.Name, perr), Kind: cloud.ErrTransient, Err: err}
		}
		op = next
	}
	if op.Error == nil || len(op.Error.Errors) == 0 {
		return nil
	}
	var codes, messages []string
	for _, e := range op.Error.Errors {
		codes = append(codes, e.Code)
		messages = append(messages, e.Message)
	}
	return codeError(call, int(op.HttpErrorStatusCode), codes, messages)
}
