// Package version is molt's own release, as every binary, member and agent
// reports it. A release build sets both variables with the linker
// (-X github.com/moltproject/molt/internal/version.Version=0.2.0 and
// .Commit=<sha>); a plain `go build` keeps the development version and takes
// the commit from the build's VCS stamp when there is one.
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is molt's semantic version, without a leading "v". A build from a
// working tree between releases carries the next release's version with the
// "-dev" pre-release suffix, so it sorts before that release.
var Version = "0.2.0-dev"

// Commit is the source commit the binary was built from ("" when unknown).
var Commit = ""

// Info is what a binary reports about itself.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion"`
}

// Get returns this binary's Info.
func Get() Info {
	return Info{Version: Version, Commit: commit(), GoVersion: runtime.Version()}
}

// String is the one line `--version` prints: "molt 0.2.0 (commit abc1234, go1.26.8)".
func (i Info) String() string {
	c := i.Commit
	if c == "" {
		c = "unknown"
	} else if len(c) > 12 {
		c = c[:12]
	}
	return "molt " + i.Version + " (commit " + c + ", " + i.GoVersion + ")"
}

func commit() string {
	if Commit != "" {
		return Commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}
