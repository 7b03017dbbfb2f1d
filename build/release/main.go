// Command release packs a molt release from binaries already built: a
// versioned tarball per binary (the daemons' with their unit, environment
// file and install.sh), a .deb for molt-agent and molt-coordinator, and
// SHA256SUMS over them. `make release` builds the binaries with the version
// and commit set by the linker and runs it (docs/release.md).
//
// It is a module of its own so that nfpm, which packs the .debs, and what
// it pulls in (about forty modules) stay out of molt's go.mod and out of
// every daemon's dependency graph.
//
//	go run . -version 0.2.0 -repo ../.. -bin DIR -out DIR   # SOURCE_DATE_EPOCH set
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

func main() {
	var cfg Config
	flag.StringVar(&cfg.Version, "version", "", "the release's version, semver without a leading v (required)")
	flag.StringVar(&cfg.Repo, "repo", "../..", "the repository root")
	flag.StringVar(&cfg.Bin, "bin", "", "directory of the built binaries (required)")
	flag.StringVar(&cfg.Out, "out", "", "directory the artifacts are written to (required)")
	flag.StringVar(&cfg.Arch, "arch", runtime.GOARCH, "GOARCH the binaries were built for")
	flag.Parse()
	if cfg.Bin == "" || cfg.Out == "" {
		fail(fmt.Errorf("-bin and -out are required"))
	}
	// The one time every file inside carries, so that a rebuild from the
	// same commit gives the same bytes; make release sets it to the
	// commit's time.
	epoch, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		fail(fmt.Errorf("SOURCE_DATE_EPOCH: %w", err))
	}
	cfg.MTime = time.Unix(epoch, 0).UTC()
	names, err := Build(cfg)
	if err != nil {
		fail(err)
	}
	for _, n := range names {
		fmt.Println(n)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}
