package coordinator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReqOfTellsWaitsInOneSecondApart: every try after a wait is a new
// request to the provider, however close the waits; a repeat of the same
// try (a new leader) is the same request. With the wait's second alone,
// TestMIGSurgeWaitsForCapacityThenRollsBack hung when two 50 ms retries
// fell in one second: the memory cloud answered the later create as the
// earlier one, done, and the replacement it waited for never came.
func TestReqOfTellsWaitsInOneSecondApart(t *testing.T) {
	at := time.Date(2026, 11, 26, 6, 0, 5, 490_000_000, time.UTC)
	first := reqOf("u/n/0/a0", time.Time{})("create")
	second := reqOf("u/n/0/a0", at)("create")
	third := reqOf("u/n/0/a0", at.Add(50*time.Millisecond))("create")
	require.Equal(t, "u/n/0/a0/create", first)
	require.NotEqual(t, second, third, "two waits in one second")
	require.NotEqual(t, first, second)
	require.Equal(t, second, reqOf("u/n/0/a0", at)("create"), "the same try asks the same request")
	// The record keeps the wait's time to the nanosecond through Raft
	// (JSON, RFC 3339 with nanoseconds), so every leader asks alike.
	b, err := at.Add(50 * time.Millisecond).MarshalJSON()
	require.NoError(t, err)
	var back time.Time
	require.NoError(t, back.UnmarshalJSON(b))
	require.Equal(t, third, reqOf("u/n/0/a0", back)("create"))
}
