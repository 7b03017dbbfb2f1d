package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/moltproject/molt/api"
)

// errStopped means ctx ended mid-operation: the operation is left
// unfinished in the journal and resumed by the next Run.
var errStopped = errors.New("agent: stopped mid-operation")

// ErrAborted wraps a Hooks error: the operation stopped at a step as if
// the process had died there.
var ErrAborted = errors.New("agent: aborted by hook")

// ErrUnknownOperation means the operation is invalid or of an unknown kind.
var ErrUnknownOperation = errors.New("unknown or invalid operation")

// run is one execution (or resumption) of an operation.
type run struct {
	a  *Agent
	op api.Operation
	st opState
}

// done reports whether step was journaled for this operation.
func (r *run) done(step string) bool { return r.st.Steps[step] }

// mark journals step (with data merged into the operation's data) and then
// calls the hook: when the hook runs, the step is durable.
func (r *run) mark(ctx context.Context, step string, data map[string]string) error {
	if err := r.a.journal.append(record{ID: r.op.ID, Step: step, Data: data}); err != nil {
		return err
	}
	r.st.Steps[step] = true
	for k, v := range data {
		r.st.Data[k] = v
	}
	r.a.log.Debug("operation step", "op", r.op.ID, "step", step)
	if r.a.hooks != nil {
		if err := r.a.hooks.At(ctx, r.op.ID, step); err != nil {
			return fmt.Errorf("%w at %s of %s: %w", ErrAborted, step, r.op.ID, err)
		}
	}
	return nil
}

// execute runs op to a result. An ID the journal already finished is not
// run again: its recorded result is returned. It returns an error only
// when the operation must stay unfinished (hook abort, ctx ended, journal
// unwritable); every failure of the operation itself is a failed result.
func (a *Agent) execute(ctx context.Context, op api.Operation) (api.OperationResult, error) {
	if op.ID == "" {
		a.log.Error("operation without id ignored", "kind", op.Kind)
		return api.OperationResult{}, nil
	}
	if st, ok := a.journal.get(op.ID); ok {
		if st.Result != nil {
			a.log.Info("operation already finished; re-reporting its result", "op", op.ID)
			return *st.Result, nil
		}
		op = st.Op // resume exactly what was accepted, not a re-sent body
	}
	started := a.clock.Now()
	if err := op.Validate(); err != nil {
		res := api.OperationResult{ID: op.ID, Kind: op.Kind, State: api.OpFailed, StartedAt: started,
			Message: fmt.Errorf("%w: %w", ErrUnknownOperation, err).Error()}
		return a.finish(res)
	}
	st, ok := a.journal.get(op.ID)
	if !ok {
		if err := a.journal.append(record{ID: op.ID, Step: StepStarted, Operation: &op}); err != nil {
			return api.OperationResult{}, err
		}
		st, _ = a.journal.get(op.ID)
		a.reportRunning(ctx, op, started)
		if a.hooks != nil {
			if err := a.hooks.At(ctx, op.ID, StepStarted); err != nil {
				return api.OperationResult{}, fmt.Errorf("%w at %s of %s: %w", ErrAborted, StepStarted, op.ID, err)
			}
		}
	} else {
		started = st.Started
	}
	r := &run{a: a, op: op, st: st}
	log := a.log.With("op", op.ID, "kind", op.Kind)
	log.Info("executing operation")

	var (
		details map[string]string
		err     error
	)
	switch op.Kind {
	case api.OpUpgradeBinary:
		details, err = r.upgradeBinary(ctx)
	case api.OpUpgradeStaticPods:
		details, err = r.upgradeStaticPods(ctx)
	case api.OpImportImages:
		details, err = r.importImages(ctx)
	case api.OpPullImages:
		details, err = r.pullImages(ctx)
	case api.OpRollback:
		details, err = r.rollback(ctx)
	case api.OpCheckArtifacts:
		details, err = r.checkArtifacts(ctx)
	case api.OpProbePeers:
		details, err = r.probePeers(ctx)
	case api.OpUpdateAgent:
		details, err = r.updateAgent(ctx)
	case api.OpEtcdSnapshot:
		details, err = r.etcdSnapshot(ctx)
	default: // Validate refuses unknown kinds; this guards a new kind without a handler
		err = fmt.Errorf("%w: kind %q has no executor", ErrUnknownOperation, op.Kind)
	}
	if errors.Is(err, ErrAborted) || errors.Is(err, errJournal) {
		return api.OperationResult{}, err
	}
	if err != nil && ctx.Err() != nil {
		return api.OperationResult{}, errStopped
	}
	res := api.OperationResult{ID: op.ID, Kind: op.Kind, State: api.OpSucceeded, StartedAt: started, Details: details}
	if err != nil {
		res.State, res.Message = api.OpFailed, err.Error()
		log.Error("operation failed", "err", err)
	} else {
		log.Info("operation succeeded")
	}
	return a.finish(res)
}

// finish journals the result; from now on the ID is never executed again.
// It is also where the operation is counted, once: a re-reported result
// does not pass here. The duration of a resumed operation includes the
// restart, since StartedAt is the journaled start.
func (a *Agent) finish(res api.OperationResult) (api.OperationResult, error) {
	res.FinishedAt = a.clock.Now()
	if err := a.journal.append(record{ID: res.ID, Step: StepFinished, Result: &res}); err != nil {
		return api.OperationResult{}, err
	}
	a.metrics.Operation(string(res.Kind), string(res.State), res.FinishedAt.Sub(res.StartedAt))
	if a.hooks != nil {
		if err := a.hooks.At(context.Background(), res.ID, StepFinished); err != nil {
			return api.OperationResult{}, fmt.Errorf("%w at %s of %s: %w", ErrAborted, StepFinished, res.ID, err)
		}
	}
	return res, nil
}

// reportRunning tells the coordinator, once and best effort, that the
// operation started; the final result is what counts.
func (a *Agent) reportRunning(ctx context.Context, op api.Operation, started time.Time) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = a.client.ReportResult(rctx, a.cfg.Cluster, a.cfg.Node,
		api.OperationResult{ID: op.ID, Kind: op.Kind, State: api.OpRunning, StartedAt: started})
}
