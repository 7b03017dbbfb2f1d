package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/internal/poll"
	"github.com/moltproject/molt/phases"
)

// TestResultsWaitingForAnEntryGoInTheNext holds the first batch's commit
// until ten more results are waiting, and checks that those ten go in one
// entry, each caller getting its own result's answer (a stale one
// acknowledged, a refused one its error), and that a batch keeps to its
// byte bound.
func TestResultsWaitingForAnEntryGoInTheNext(t *testing.T) {
	var b resultBatcher
	release := make(chan struct{})
	var mu sync.Mutex
	var batches [][]string
	refused := errors.New("refused")
	commit := func(c statemachine.PreflightResultsCmd) ([]error, error) {
		mu.Lock()
		first := len(batches) == 0
		var ids []string
		for _, r := range c.Results {
			ids = append(ids, r.Result.ID)
		}
		batches = append(batches, ids)
		mu.Unlock()
		if first {
			<-release
		}
		errs := make([]error, len(c.Results))
		for i, r := range c.Results {
			switch {
			case strings.HasSuffix(r.Result.ID, "-stale"):
				errs[i] = fmt.Errorf("recorded: %w", phases.ErrStale)
			case strings.HasSuffix(r.Result.ID, "-bad"):
				errs[i] = refused
			}
		}
		return errs, nil
	}
	result := func(id string) statemachine.PreflightResultCmd {
		return statemachine.PreflightResultCmd{Cluster: "c", Run: "r", Node: "n", Result: api.OperationResult{ID: id, State: api.OpSucceeded}}
	}
	ctx := context.Background()
	answers := make([]error, 11)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); answers[0] = b.submit(ctx, result("first"), commit) }()
	require.NoError(t, until(ctx, func() bool { mu.Lock(); defer mu.Unlock(); return len(batches) == 1 }))
	for i := 1; i <= 10; i++ {
		id := fmt.Sprintf("r%d", i)
		switch i {
		case 3:
			id += "-stale"
		case 7:
			id += "-bad"
		}
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = b.submit(ctx, result(id), commit) }()
	}
	require.NoError(t, until(ctx, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.pending) == 10 }))
	close(release)
	wg.Wait()
	require.Len(t, batches, 2)
	require.Equal(t, []string{"first"}, batches[0])
	require.Len(t, batches[1], 10, "the ten that waited, in one entry")
	for i, err := range answers {
		if i == 7 {
			require.ErrorIs(t, err, refused)
			continue
		}
		require.NoError(t, err, "result %d (a stale one is acknowledged)", i)
	}
	require.False(t, b.flushing, "nothing left in flight")

	// The byte bound: results of 200 KB each go two to an entry.
	big := func(i int) statemachine.PreflightResultCmd {
		r := result(fmt.Sprintf("big%d", i))
		r.Result.Details = map[string]string{"d": strings.Repeat("x", 200<<10)}
		return r
	}
	for i := range 5 {
		b.pending = append(b.pending, pendingResult{cmd: big(i), done: make(chan error, 1)})
	}
	var sizes []int
	for batch := b.next(); batch != nil; batch = b.next() {
		sizes = append(sizes, len(batch))
	}
	require.Equal(t, []int{2, 2, 1}, sizes)
}

// until polls cond for at most 10 s.
func until(ctx context.Context, cond func() bool) error {
	return poll.Until(ctx, 10*time.Second, time.Millisecond, func(context.Context) (bool, string, error) { return cond(), "not yet", nil })
}
