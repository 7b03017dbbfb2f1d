package command

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// ErrCannotRead means an entry or a snapshot was written by a molt
// release newer than this one, in a form this release cannot apply: a
// command number it does not know, a field it does not declare
// (ErrUnknownField is one case and is treated alike), a snapshot format
// or a value (a step layout) newer than it reads. It is not a domain
// refusal: a newer member applies the entry, so refusing it here would
// make the replicas differ. A Machine returns it (wrapped) from an
// ApplyFunc or from Restore, and raftstore halts the replica at that
// entry instead of applying anything after it.
var ErrCannotRead = errors.New("raftstore: written by a newer release")

// CannotRead reports whether err says that this release cannot read
// what it was given (ErrCannotRead or ErrUnknownField), as opposed to a
// domain refusal or a corrupt entry.
func CannotRead(err error) bool {
	return errors.Is(err, ErrCannotRead) || errors.Is(err, ErrUnknownField)
}

// BaselineVersion is the molt release before versions were recorded
// (commit bb51d81): everything it wrote, every release reads. A member or
// an entry that names no version is taken to be of it.
const BaselineVersion = "0.1.0"

// Entry extensions. Every entry raftstore proposes carries, in
// raft.Log.Extensions, the lowest molt release that can read it, so that
// an older member that meets it can say which release it needs. The
// bytes are a JSON object:
//
//	{"minVersion":"0.2.0"}
//
// Keys are only ever added; a reader ignores keys it does not know (the
// extension is advice: decoding the entry still decides whether it can
// be applied), and bytes that are not such an object are read as no
// extension at all. Releases before 0.2.0 write none and ignore it.
type extensions struct {
	MinVersion string `json:"minVersion,omitempty"`
}

// EncodeExtensions returns the extension bytes of an entry that molt
// minVersion and later read; nil for "".
func EncodeExtensions(minVersion string) []byte {
	if minVersion == "" {
		return nil
	}
	b, _ := json.Marshal(extensions{MinVersion: minVersion}) // a string field cannot fail
	return b
}

// DecodeExtensions returns the minimum version an entry's extensions
// name, "" when they name none or are not this format.
func DecodeExtensions(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var e extensions
	if json.Unmarshal(b, &e) != nil {
		return ""
	}
	return e.MinVersion
}

// VersionBelow reports whether version have is older than need, by their
// major.minor.patch alone: a pre-release ("0.2.0-dev", a build between
// releases) reads what its release reads. ok is false when either is
// not a version, and nothing can be said.
func VersionBelow(have, need string) (below, ok bool) {
	h, okh := versionCore(have)
	n, okn := versionCore(need)
	if !okh || !okn {
		return false, false
	}
	for i := range h {
		if h[i] != n[i] {
			return h[i] < n[i], true
		}
	}
	return false, true
}

// versionCore parses "X.Y.Z" with an optional "v", pre-release or build
// suffix.
func versionCore(s string) ([3]int, bool) {
	var out [3]int
	s = strings.TrimPrefix(s, "v")
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p != strconv.Itoa(n) {
			return out, false
		}
		out[i] = n
	}
	return out, true
}
