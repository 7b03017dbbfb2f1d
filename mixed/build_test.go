//go:build mixed

package mixed

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moltproject/molt/internal/cachedir"
)

const versionPkg = "github.com/moltproject/molt/internal/version"

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
	f, err := os.Open(filepath.Join(root, "build", "previous-release"))
	if err != nil {
		t.Fatalf("the previous release is pinned in build/previous-release: %v", err)
	}
	defer f.Close()
	var rel previousRelease
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch k {
		case "commit":
			rel.commit = strings.TrimSpace(v)
		case "version":
			rel.version = strings.TrimSpace(v)
		}
	}
	if len(rel.commit) != 40 || rel.version == "" {
		t.Fatalf("build/previous-release: want a line `commit <40 hex digits>` and a line `version <semver>`, got %+v", rel)
	}
	return rel
}

// buildPrevious returns the previous release's molt-coordinator, built
// from its commit (git archive into a temporary directory, go build) once
// and cached under the build cache by commit. The commit must be in this
// repository's history: the test fails otherwise, never skips.
func buildPrevious(t *testing.T, root string, rel previousRelease) string {
	t.Helper()
	dir := filepath.Join(cachedir.Build(), "molt-release", rel.commit)
	bin := filepath.Join(dir, "molt-coordinator")
	if fi, err := os.Stat(bin); err == nil && fi.Mode()&0o111 != 0 {
		t.Logf("previous release %s (%s): cached %s", rel.version, rel.commit[:12], bin)
		return bin
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", rel.commit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("the previous release's commit %s (build/previous-release, molt %s) is not in this repository's history "+
			"(a shallow clone? fetch the full history: git fetch --unshallow): %v %s", rel.commit, rel.version, err, out)
	}
	began := time.Now()
	src := t.TempDir()
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", rel.commit)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr, untar.Stderr = &stderr, &stderr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v %s", rel.commit, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("tar -x of %s: %v %s", rel.commit, err, stderr.String())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	// The release's version and commit, as a release build sets them; a
	// release before internal/version existed ignores them.
	build := exec.Command("go", "build", "-ldflags", fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", versionPkg, rel.version, versionPkg, rel.commit),
		"-o", filepath.Join(tmp, "molt-coordinator"), "./cmd/molt-coordinator")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the previous release %s (%s): %v\n%s", rel.version, rel.commit, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "molt-coordinator"), bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("previous release %s (%s) built in %v into %s", rel.version, rel.commit[:12], time.Since(began).Round(time.Millisecond), bin)
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
