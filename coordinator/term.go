package coordinator

import (
	"context"
	"sync"
)

// term is one leadership term's runtime. Everything the leader starts —
// the leader loop itself and every work item — runs under ctx and is
// counted in wg, so ending the term (cancel, then wait) leaves nothing of
// it running. Work items also hold one of slots while they run, which
// bounds how many run at once (Config.MaxConcurrentWork).
type term struct {
	ctx    context.Context // carries the term itself (termOf)
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{}
	// finished is called after each work item ends (it wakes the leader
	// loop, which may start what waited for a slot).
	finished func()

	mu       sync.Mutex
	ended    bool            // end was called: nothing more starts
	inflight map[string]bool // action IDs running now
}

type termKey struct{}

func newTerm(parent context.Context, maxWork int, finished func()) *term {
	t := &term{slots: make(chan struct{}, maxWork), finished: finished, inflight: map[string]bool{}}
	ctx, cancel := context.WithCancel(parent)
	t.ctx, t.cancel = context.WithValue(ctx, termKey{}, t), cancel
	return t
}

// termOf returns the term whose context ctx is (or derives from); nil
// outside any term.
func termOf(ctx context.Context) *term {
	t, _ := ctx.Value(termKey{}).(*term)
	return t
}

// goLoop runs the term's leader loop: counted in wg, but not in slots.
func (t *term) goLoop(fn func(context.Context)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		fn(t.ctx)
	}()
}

// start runs fn for action id unless that ID is already running, every
// slot is taken, or the term has ended; it reports whether fn started.
// Work that did not start is decided again by a later tick (every work
// item is idempotent and keyed by its action ID), so the caller need not
// wait for a slot.
func (t *term) start(id string, fn func(context.Context)) bool {
	t.mu.Lock()
	if t.ended || t.ctx.Err() != nil || t.inflight[id] {
		t.mu.Unlock()
		return false
	}
	select {
	case t.slots <- struct{}{}:
	default:
		t.mu.Unlock()
		return false
	}
	t.inflight[id] = true
	defer t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() {
			t.mu.Lock()
			delete(t.inflight, id)
			t.mu.Unlock()
			<-t.slots
			if t.finished != nil {
				t.finished()
			}
		}()
		fn(t.ctx)
	}()
	return true
}

// running returns how many work items run now.
func (t *term) running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.inflight)
}

// end cancels the term and waits until everything it started has returned.
func (t *term) end() {
	t.mu.Lock()
	t.ended = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
}
