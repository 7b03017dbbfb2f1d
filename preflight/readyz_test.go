package preflight_test

import (
	"testing"

	"github.com/moltproject/molt/preflight"
	"github.com/stretchr/testify/require"
)

func TestParseReadyz(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		ready   bool
		passed  []string
		failing []string
	}{
		{"healthy", 200, "[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]etcd-readiness ok\nreadyz check passed\n", true,
			[]string{"etcd", "etcd-readiness", "log", "ping"}, nil},
		{"etcd down", 500, "[+]ping ok\n[-]etcd failed: reason withheld\n[-]etcd-readiness failed: reason withheld\nreadyz check failed\n", false,
			[]string{"ping"}, []string{"etcd", "etcd-readiness"}},
		{"500 without lines", 500, "internal error", false, nil, []string{"readyz"}},
		{"200 listing a failure", 200, "[+]ping ok\n[-]informer-sync failed\n", false, []string{"ping"}, []string{"informer-sync"}},
		{"terse ok", 200, "ok", true, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := preflight.ParseReadyz(tc.status, tc.body)
			require.Equal(t, tc.ready, h.Ready)
			require.Equal(t, tc.passed, h.Passed)
			require.Equal(t, tc.failing, h.Failing)
			require.NotEmpty(t, h.Message)
		})
	}
}
