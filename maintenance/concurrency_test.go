package maintenance

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Compiled policy is shared by the coordinator's goroutines; run with
// -race, this fails if a query mutates shared state (rrule-go's RRule does
// when iterated, which is why every query builds its own).
func TestCompiledIsSafeForConcurrentUse(t *testing.T) {
	c := mustCompile(t, benchPolicy())
	want, ok := c.NextOpportunity(cpMinor, t0)
	require.True(t, ok)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 20 {
				got, ok := c.NextOpportunity(cpMinor, t0)
				if !ok || !got.Equal(want) {
					t.Errorf("goroutine %d: got %s, %v", i, got, ok)
				}
				c.Allowed(cpPatch, t0.Add(time.Duration(j)*time.Hour))
			}
		})
	}
	wg.Wait()
}
