package poll_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/poll"
)

func TestUntilDone(t *testing.T) {
	calls := 0
	err := poll.Until(context.Background(), time.Minute, time.Millisecond, func(context.Context) (bool, string, error) {
		calls++
		return calls == 3, "not yet", nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls)
}

func TestUntilStopsAtAnError(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	err := poll.Until(context.Background(), time.Minute, time.Millisecond, func(context.Context) (bool, string, error) {
		calls++
		return false, "", boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, calls)
}

// The timeout's error says how long was waited and the last reason, and
// wraps the context's error.
func TestUntilTimeoutCarriesTheLastReason(t *testing.T) {
	calls := 0
	reasons := []string{"first", "second"}
	err := poll.Until(context.Background(), 0, time.Millisecond, func(context.Context) (bool, string, error) {
		calls++
		return false, reasons[min(calls, 2)-1], nil
	})
	var te *poll.TimeoutError
	require.ErrorAs(t, err, &te)
	require.Equal(t, "after 0s: first", err.Error())
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// A reason per call: the last one is kept.
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = poll.Until(ctx, time.Minute, time.Millisecond, func(context.Context) (bool, string, error) {
		calls++
		if calls == 2 {
			cancel()
		}
		return false, reasons[calls-1], nil
	})
	require.Equal(t, "after 1m0s: second", err.Error())
	require.ErrorIs(t, err, context.Canceled)
}

func TestTimeoutErrorWithoutAReason(t *testing.T) {
	require.Equal(t, "after 1s: condition not met", (&poll.TimeoutError{After: time.Second}).Error())
}
