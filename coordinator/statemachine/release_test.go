package statemachine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
)

// TestPutReleaseReplaysLenientVersions: phases.ParseVersion became strict,
// but log entries written before that carry versions it now refuses; they
// still apply as they did, under the canonical version.
func TestPutReleaseReplaysLenientVersions(t *testing.T) {
	for in, want := range map[string]string{" 1.36.14": "1.36.14", "1.+36.11": "1.36.11", "1.-0.12": "1.0.12", "+1.36.13": "1.36.13", "1.36.2": "1.36.2"} {
		_, err := phases.ParseVersion(in)
		if in != want {
			require.Error(t, err, in)
		}
		s := newState()
		_, err = s.putRelease(PutReleaseCmd{Release: api.Release{Version: in}})
		require.NoError(t, err, in)
		require.Contains(t, s.Releases, want, in)
		require.Len(t, s.Releases, 1)
	}
	s := newState()
	_, err := s.putRelease(PutReleaseCmd{Release: api.Release{Version: "1.36"}})
	require.ErrorIs(t, err, ErrInvalid)
}
