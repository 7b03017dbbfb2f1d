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

// TestAdmitReleaseRefusesWhatOldEntriesStillApply: a request's release
// ships a component and names component versions that are versions
// (AdmitRelease); a logged entry without either, written before those
// rules, still applies as it did.
func TestAdmitReleaseRefusesWhatOldEntriesStillApply(t *testing.T) {
	sum := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	withContainerd := func(version string) api.Release {
		return api.Release{Version: "1.36.2", Components: api.ReleaseComponents{Containerd: api.BinaryArtifact{URL: "http://a.test/c", SHA256: sum, Version: version}}}
	}
	for _, tc := range []struct {
		name string
		r    api.Release
		rule string
	}{
		{"no components", api.Release{Version: "1.36.2"}, "release-components"},
		{"a version without an artifact", api.Release{Version: "1.36.2", Components: api.ReleaseComponents{Containerd: api.BinaryArtifact{Version: "2.1.4"}}}, "release-artifact"},
		{"a command as version", withContainerd(`"; rm -rf /"`), phases.RuleInvalid},
		{"a path as version", withContainerd("../../etc/x"), phases.RuleInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := AdmitRelease(&tc.r)
			var re *RuleError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.rule, re.Rule)
			require.ErrorIs(t, err, ErrInvalid)

			s := newState()
			_, err = s.putRelease(PutReleaseCmd{Release: tc.r})
			require.NoError(t, err, "a logged entry applies as it did")
			require.Contains(t, s.Releases, "1.36.2")
		})
	}
	ok := withContainerd("1.6.20~ds1")
	_, err := AdmitRelease(&ok)
	require.NoError(t, err)
}
