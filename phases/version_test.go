package phases

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		ok   bool
	}{
		{"1.30.2", Version{1, 30, 2}, true},
		{"v1.34.4", Version{1, 34, 4}, true},
		{" 1.0.0 ", Version{}, false},
		{" 1.36.14", Version{}, false},
		{"1.36.14\n", Version{}, false},
		{"1.-0.12", Version{}, false},
		{"1.+36.11", Version{}, false},
		{"+1.36.13", Version{}, false},
		{"1.36.+1", Version{}, false},
		{"1.36.1_0", Version{}, false},
		{"1.٣.0", Version{}, false},
		{"vv1.2.3", Version{}, false},
		{"1.0.0", Version{1, 0, 0}, true},
		{"1.30", Version{}, false},
		{"1.30.2.1", Version{}, false},
		{"2.0.0", Version{}, false},
		{"1.01.0", Version{}, false},
		{"1.-1.0", Version{}, false},
		{"1.30.x", Version{}, false},
		{"1.30.2-rc.1", Version{}, false},
		{"", Version{}, false},
		{"1.9999999.0", Version{}, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseVersion(tc.in)
			if !tc.ok {
				require.ErrorIs(t, err, ErrInvalidVersion)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			back, err := ParseVersion(got.String())
			require.NoError(t, err)
			require.Equal(t, got, back)
		})
	}
}

func TestVersionCompare(t *testing.T) {
	v := MustParseVersion
	require.Equal(t, -1, v("1.13.9").Compare(v("1.14.0")))
	require.Equal(t, 1, v("1.14.1").Compare(v("1.14.0")))
	require.Equal(t, 0, v("1.14.0").Compare(v("1.14.0")))
	require.True(t, v("1.2.10").Compare(v("1.2.9")) > 0, "numeric, not lexical")
	require.Equal(t, "v1.34.4", v("1.34.4").KubeletVersion())
}

func TestVersionJSON(t *testing.T) {
	var v Version
	require.NoError(t, v.UnmarshalText([]byte("1.33.6")))
	b, err := v.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "1.33.6", string(b))
	require.Error(t, v.UnmarshalText([]byte("bogus")))
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"1.30.2", "v1.34.4", "1.0.0", "1..1", "v", "1.2.3.4", "1.02.3", "99999999999.1.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidVersion) {
				t.Fatalf("error %v does not wrap ErrInvalidVersion", err)
			}
			return
		}
		back, err := ParseVersion(v.String())
		if err != nil || back != v {
			t.Fatalf("round trip %q → %v → %v, %v", s, v, back, err)
		}
		// Strict: only the canonical text, with or without "v", parses.
		if s != v.String() && s != "v"+v.String() {
			t.Fatalf("ParseVersion(%q) = %v: accepted text that is not canonical", s, v)
		}
	})
}

func FuzzCheckUpgrade(f *testing.F) {
	f.Add("1.13.0", "1.15.0")
	f.Add("1.14.2", "1.14.1")
	f.Add("1.14.2", "1.15.0")
	f.Add("1.14.2", "1.14.2")
	f.Fuzz(func(t *testing.T, a, b string) {
		from, err1 := ParseVersion(a)
		to, err2 := ParseVersion(b)
		if err1 != nil || err2 != nil {
			return
		}
		err := CheckUpgrade(from, to)
		allowed := (to.Minor == from.Minor && to.Patch > from.Patch) || to.Minor == from.Minor+1
		if allowed != (err == nil) {
			t.Fatalf("%s → %s: allowed=%v err=%v", from, to, allowed, err)
		}
		if err != nil && RuleOf(err) == "" {
			t.Fatalf("refusal %v names no rule", err)
		}
	})
}

func TestCheckComponentVersion(t *testing.T) {
	for _, ok := range []string{"1.7.0", "2.1.4", "v1.7.35", "2.1.0-rc.1", "1.7.22+abc.1", "1.6.20~ds1", "10.0.0"} {
		require.NoError(t, CheckComponentVersion(ok), ok)
	}
	for _, bad := range []string{"", `"; rm -rf /"`, "; rm -rf /", "../../etc/x", "1.7", "1.7.0.1", "01.7.0", "1.+7.0", " 1.7.0", "1.7.0 ",
		"1.7.0-", "1.7.0-rc/1", "1.7.0;x", "1.7.0\n", "1.7.0-" + strings.Repeat("a", 64), "vv1.7.0", "1.7.x"} {
		err := CheckComponentVersion(bad)
		require.ErrorIs(t, err, ErrInvalidVersion, "%q", bad)
	}
}
