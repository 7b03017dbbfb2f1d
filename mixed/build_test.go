//go:build mixed

package mixed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moltproject/molt/internal/prevrelease"
)

const versionPkg = prevrelease.VersionPkg

// repoRoot is the repository this package is in.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// previousRelease is build/previous-release: the commit and version of the
// release before this one.
type previousRelease struct{ commit, version string }

func readPreviousRelease(t *testing.T, root string) previousRelease {
	t.Helper()
	p, err := prevrelease.Read(root, filepath.Join("build", "previous-release"))
	if err != nil {
		t.Fatalf("the previous release is pinned in build/previous-release: %v", err)
	}
	return previousRelease{commit: p.Commit, version: p.Version}
}

// buildPrevious returns the previous release's molt-coordinator, built
// from its commit (git archive into a temporary directory, go build) once
// and cached under the build cache by commit (internal/prevrelease). The
// commit must be in this repository's history: the test fails otherwise,
// never skips.
func buildPrevious(t *testing.T, root string, rel previousRelease) string {
	t.Helper()
	p := prevrelease.Pin{File: filepath.Join("build", "previous-release"), Commit: rel.commit, Version: rel.version}
	bins, built, took, err := prevrelease.Build(root, p, "molt-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	bin := bins["molt-coordinator"]
	if built {
		t.Logf("previous release %s (%s) built in %v into %s", rel.version, rel.commit[:12], took.Round(time.Millisecond), bin)
	} else {
		t.Logf("previous release %s (%s): cached %s", rel.version, rel.commit[:12], bin)
	}
	return bin
}

// build is one binary to build from the current tree.
type build struct {
	name    string // the output file's name
	pkg     string // ./cmd/...
	tags    string
	ldflags string
}

// built are the binaries of the current tree this test process built,
// by what was built (tests share them: a second link of the same binary
// is the larger part of a warm run's build time); binDir holds them
// (TestMain removes it).
var (
	builtMu sync.Mutex
	built   = map[build]string{}
	binDir  string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "molt-mixed-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildCurrent builds binaries of the current tree at once, or takes
// those an earlier test built (the Go build cache makes a warm run link
// only).
func buildCurrent(t *testing.T, root string, builds ...build) map[string]string {
	t.Helper()
	began := time.Now()
	builtMu.Lock()
	defer builtMu.Unlock()
	out := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []string
	for i, b := range builds {
		if path, ok := built[b]; ok {
			out[b.name] = path
			continue
		}
		path := filepath.Join(binDir, fmt.Sprintf("%d-%d-%s", len(built), i, b.name))
		args := []string{"build", "-o", path}
		if b.tags != "" {
			args = append(args, "-tags", b.tags)
		}
		if b.ldflags != "" {
			args = append(args, "-ldflags", b.ldflags)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command("go", append(args, b.pkg)...)
			cmd.Dir = root
			o, err := cmd.CombinedOutput()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("go build %s (%s): %v\n%s", b.pkg, b.name, err, o))
				return
			}
			out[b.name] = path
			built[b] = path
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(strings.Join(errs, "\n"))
	}
	t.Logf("current binaries ready in %v", time.Since(began).Round(time.Millisecond))
	return out
}
