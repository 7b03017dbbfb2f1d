package phases

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckUpgrade(t *testing.T) {
	v := MustParseVersion
	for _, tc := range []struct {
		from, to string
		rule     string
		sentinel error
	}{
		{"1.14.0", "1.14.3", "", nil},
		{"1.14.5", "1.15.0", "", nil},
		{"1.14.5", "1.15.9", "", nil},
		{"1.14.5", "1.14.4", RuleDowngrade, ErrDowngrade},
		{"1.15.0", "1.14.9", RuleDowngrade, ErrDowngrade},
		{"1.14.5", "1.14.5", RuleSame, ErrSame},
		{"1.13.0", "1.15.0", RuleSkipMinor, ErrSkipMinor},
		{"1.13.9", "1.16.0", RuleSkipMinor, ErrSkipMinor},
	} {
		t.Run(tc.from+"->"+tc.to, func(t *testing.T) {
			err := CheckUpgrade(v(tc.from), v(tc.to))
			if tc.rule == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.sentinel)
			require.Equal(t, tc.rule, RuleOf(err))
			require.Contains(t, err.Error(), tc.rule)
		})
	}
}

func TestCheckAdminUpgrade(t *testing.T) {
	v := MustParseVersion
	users := []ClusterVersion{{"u1", v("1.14.2")}, {"u2", v("1.13.9")}}
	// Patch of the admin is always fine.
	require.NoError(t, CheckAdminUpgrade(v("1.14.0"), v("1.14.5"), users))
	// A new minor needs every user on the admin's current minor.
	err := CheckAdminUpgrade(v("1.14.0"), v("1.15.0"), users)
	require.ErrorIs(t, err, ErrAdminSkew)
	require.Equal(t, RuleAdminSkew, RuleOf(err))
	require.Contains(t, err.Error(), "u2")
	users[1].Version = v("1.14.0")
	require.NoError(t, CheckAdminUpgrade(v("1.14.0"), v("1.15.0"), users))
	require.NoError(t, CheckAdminUpgrade(v("1.14.0"), v("1.15.0"), nil))
}

func TestCheckUserUpgrade(t *testing.T) {
	v := MustParseVersion
	require.NoError(t, CheckUserUpgrade(v("1.15.0"), v("1.15.2")))
	require.NoError(t, CheckUserUpgrade(v("1.15.2"), v("1.15.2")))
	err := CheckUserUpgrade(v("1.16.0"), v("1.15.2"))
	require.ErrorIs(t, err, ErrUserAhead)
	require.Equal(t, RuleUserAhead, RuleOf(err))
	require.NoError(t, CheckUserUpgrade(v("1.16.0"), Version{}))
}

func TestCheckNodeVersions(t *testing.T) {
	v := MustParseVersion
	require.NoError(t, CheckNodeVersions(v("1.15.0"), map[Version]int{v("1.14.2"): 3, v("1.15.0"): 2}))
	err := CheckNodeVersions(v("1.15.0"), map[Version]int{v("1.14.2"): 3, v("1.15.0"): 2, v("1.13.0"): 1})
	require.Equal(t, RuleMixedSkew, RuleOf(err))
	err = CheckNodeVersions(v("1.14.2"), map[Version]int{v("1.15.0"): 1})
	require.ErrorIs(t, err, ErrNodesNewer)
}
