package phases

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is a Kubernetes-style release version 1.N.X.
type Version struct {
	Major, Minor, Patch int
}

// ErrInvalidVersion is returned for text that is not a 1.N.X version.
var ErrInvalidVersion = errors.New("invalid version")

// maxComponent bounds each number so comparisons and arithmetic never
// overflow whatever the input.
const maxComponent = 1_000_000

// ParseVersion parses "1.N.X", with or without a leading "v". It is
// strict: each component is ASCII digits only, with no sign, no space and
// no leading zero (other than "0" itself), so every accepted text is the
// canonical rendering of exactly one version (or that with a "v").
// Pre-release and build suffixes are refused: molt upgrades only to
// released versions.
func ParseVersion(s string) (Version, error) {
	t := strings.TrimPrefix(s, "v")
	parts := strings.Split(t, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("%w %q: want MAJOR.MINOR.PATCH", ErrInvalidVersion, s)
	}
	var n [3]int
	for i, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') || !allDigits(p) {
			return Version{}, fmt.Errorf("%w %q: component %q", ErrInvalidVersion, s, p)
		}
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > maxComponent {
			return Version{}, fmt.Errorf("%w %q: component %q", ErrInvalidVersion, s, p)
		}
		n[i] = v
	}
	if n[0] != 1 {
		return Version{}, fmt.Errorf("%w %q: only major version 1 exists", ErrInvalidVersion, s)
	}
	return Version{Major: n[0], Minor: n[1], Patch: n[2]}, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// MustParseVersion is ParseVersion for constants in tests and tables.
func MustParseVersion(s string) Version {
	v, err := ParseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// String renders the version as 1.N.X.
func (v Version) String() string {
	if v.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// KubeletVersion renders the version as the kubelet reports it (v1.N.X).
func (v Version) KubeletVersion() string { return "v" + v.String() }

// IsZero reports whether the version is unset.
func (v Version) IsZero() bool { return v == Version{} }

// Compare returns -1, 0 or 1 as v is older than, equal to or newer than w.
func (v Version) Compare(w Version) int {
	for _, d := range [3]int{v.Major - w.Major, v.Minor - w.Minor, v.Patch - w.Patch} {
		if d < 0 {
			return -1
		}
		if d > 0 {
			return 1
		}
	}
	return 0
}

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool { return v.Compare(w) < 0 }

// SameMinor reports whether v and w share major and minor.
func (v Version) SameMinor(w Version) bool { return v.Major == w.Major && v.Minor == w.Minor }

// MinorString renders 1.N.
func (v Version) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// MarshalText renders the version as text, 1.N.X, for encoders.
func (v Version) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText parses a version from text; the empty string is the zero
// version.
func (v *Version) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*v = Version{}
		return nil
	}
	p, err := ParseVersion(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// MaxComponentVersionLen bounds a component's version text.
const MaxComponentVersionLen = 64

// CheckComponentVersion accepts the version of a component a release
// ships beside Kubernetes (containerd's "2.1.4", "v1.7.35"): MAJOR.MINOR.PATCH,
// with or without a leading "v", under ParseVersion's rules for each
// number (digits only, no sign, no leading zero) but any major; then
// optionally a suffix that starts with '-', '+' or '~' (SemVer's
// pre-release and build, "2.1.0-rc.1", and Debian's "1.6.20~ds1", which
// the containerd of a distribution reports) and holds only ASCII letters,
// digits and ".-+~"; at most MaxComponentVersionLen bytes in all.
// Anything else (a space, a quote, a ';', a '/') wraps ErrInvalidVersion:
// the text reaches hosts and logs, and a version is never more than this.
func CheckComponentVersion(s string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidVersion, s, why) }
	if len(s) > MaxComponentVersionLen {
		return bad(fmt.Sprintf("longer than %d bytes", MaxComponentVersionLen))
	}
	t := strings.TrimPrefix(s, "v")
	core, suffix := t, ""
	if i := strings.IndexAny(t, "-+~"); i >= 0 {
		core, suffix = t[:i], t[i:]
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return bad("want MAJOR.MINOR.PATCH")
	}
	for _, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') || !allDigits(p) {
			return bad(fmt.Sprintf("component %q", p))
		}
	}
	if strings.TrimFunc(suffix, versionSuffixRune) != "" || suffix == "-" || suffix == "+" || suffix == "~" {
		return bad(fmt.Sprintf("suffix %q: letters, digits and \".-+~\" after a '-', '+' or '~'", suffix))
	}
	return nil
}

func versionSuffixRune(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune(".-+~", r)
}
