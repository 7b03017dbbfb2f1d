package preflight

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPanickingCheckFails(t *testing.T) {
	r := runOne(Check{ID: "boom", Severity: Blocking, Run: func(Input) Result { panic("nil map") }}, Input{})
	require.Equal(t, Fail, r.Status)
	require.True(t, r.Blocks)
	require.Equal(t, "boom", r.Check)
	require.Contains(t, r.Message, "nil map")
}

func TestBytesString(t *testing.T) {
	for in, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 2 << 30: "2.0 GiB", 1536 << 20: "1.5 GiB"} {
		require.Equal(t, want, bytesString(in))
	}
}
