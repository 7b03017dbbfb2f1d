// Package prevrelease builds molt binaries of an earlier release from a
// commit of this repository's history pinned in a file, for the tests that
// run the previous release beside the current build:
//
//   - build/previous-release: the previous molt release (0.1.0, bb51d81),
//     whose molt-coordinator the mixed-version tests (package mixed)
//     upgrade member by member;
//   - build/previous-agent-release: the molt-agent a lab upgrade's molt
//     step replaces (lab/moltstep_lab_test.go). It is the newest build
//     that can update itself, not 0.1.0: molt-agent 0.1.0 predates
//     UpdateAgent and the guard, so a fleet of it is installed from the
//     0.2.0 package once (docs/agent.md).
//
// A pin file has a line `commit <40 hex digits>` and a line
// `version <semver>`: the binaries are built from `git archive` of the
// commit, stamped with the version and the commit as a release build
// stamps them, and cached in ${MOLT_BUILD_CACHE}/molt-release/<commit>/.
// The commit must be in the repository's history: a shallow clone fails
// with what to fetch, never skips. It is test infrastructure, like
// internal/hosttest.
package prevrelease

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/moltproject/molt/internal/cachedir"
)

// VersionPkg is the package whose Version and Commit the linker sets.
const VersionPkg = "github.com/moltproject/molt/internal/version"

// ErrPin is a pin file that is missing or malformed, or a commit that is
// not in the repository's history.
var ErrPin = errors.New("pinned release")

// Pin is a release pinned in a file: the commit it is built from and the
// version its binaries report.
type Pin struct {
	// File is the pin file, relative to the repository's root.
	File    string
	Commit  string
	Version string
}

// Read reads the pin file at root/file.
func Read(root, file string) (Pin, error) {
	p := Pin{File: file}
	f, err := os.Open(filepath.Join(root, file))
	if err != nil {
		return p, fmt.Errorf("%w: %v", ErrPin, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		switch k {
		case "commit":
			p.Commit = strings.TrimSpace(v)
		case "version":
			p.Version = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("%w: %s: %v", ErrPin, file, err)
	}
	if len(p.Commit) != 40 || strings.Trim(p.Commit, "0123456789abcdef") != "" || p.Version == "" {
		return p, fmt.Errorf("%w: %s: want a line `commit <40 hex digits>` and a line `version <semver>`, got commit %q version %q",
			ErrPin, file, p.Commit, p.Version)
	}
	return p, nil
}

// Dir is where the pin's binaries and files are cached.
func (p Pin) Dir() string { return filepath.Join(cachedir.Build(), "molt-release", p.Commit) }

// LDFlags are the linker flags of the pin's binaries: stripped, and
// stamped with its version and commit (a commit before internal/version
// existed ignores them).
func (p Pin) LDFlags() string {
	return fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", VersionPkg, p.Version, VersionPkg, p.Commit)
}

// Build returns the paths of the pin's binaries cmds (names under cmd/,
// e.g. "molt-agent"), building those not cached yet in one go build of the
// commit's tree (static: CGO_ENABLED=0, so they run on this machine and in
// the lab's hosts alike). A cached binary stamped with another version
// (the pin file's version changed, the commit not) is built again.
// built says whether anything was built, and took how long.
func Build(root string, p Pin, cmds ...string) (bins map[string]string, built bool, took time.Duration, err error) {
	dir := p.Dir()
	bins = map[string]string{}
	var missing []string
	for _, c := range cmds {
		bins[c] = filepath.Join(dir, c)
		if !stampedWith(bins[c], p.Version) {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return bins, false, 0, nil
	}
	began := time.Now()
	src, err := os.MkdirTemp("", "molt-release-src-")
	if err != nil {
		return nil, false, 0, err
	}
	defer os.RemoveAll(src)
	if err := extract(root, p, src); err != nil {
		return nil, false, 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, 0, err
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return nil, false, 0, err
	}
	defer os.RemoveAll(tmp)
	args := []string{"build", "-ldflags", p.LDFlags(), "-o", tmp + "/"}
	for _, c := range missing {
		args = append(args, "./cmd/"+c)
	}
	build := exec.Command("go", args...)
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, false, 0, fmt.Errorf("go build of molt %s (%s, %s): %v\n%s", p.Version, p.Commit, p.File, err, out)
	}
	// Renamed in place one by one: a concurrent build of the same commit
	// leaves whole binaries either way.
	for _, c := range missing {
		if err := os.Rename(filepath.Join(tmp, c), bins[c]); err != nil {
			return nil, false, 0, err
		}
	}
	return bins, true, time.Since(began), nil
}

// File returns the path of the commit's file path (e.g.
// "systemd/install.sh"), taken from the commit once into the cache with
// its mode (executable or not).
func File(root string, p Pin, path string) (string, error) {
	dst := filepath.Join(p.Dir(), "files", filepath.FromSlash(path))
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	if err := checkCommit(root, p); err != nil {
		return "", err
	}
	b, err := exec.Command("git", "-C", root, "show", p.Commit+":"+path).Output()
	if err != nil {
		return "", fmt.Errorf("%w: git show %s:%s: %v", ErrPin, p.Commit[:12], path, err)
	}
	mode := os.FileMode(0o644)
	if ls, err := exec.Command("git", "-C", root, "ls-tree", p.Commit, path).Output(); err == nil && bytes.HasPrefix(ls, []byte("100755")) {
		mode = 0o755
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp, dst)
}

// stampedWith reports whether bin is an executable Go binary whose linker
// flags set VersionPkg.Version to version.
func stampedWith(bin, version string) bool {
	fi, err := os.Stat(bin)
	if err != nil || fi.Mode()&0o111 == 0 {
		return false
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-ldflags" {
			return strings.Contains(" "+s.Value+" ", " -X "+VersionPkg+".Version="+version+" ")
		}
	}
	return false
}

// checkCommit fails when the pin's commit is not in root's history.
func checkCommit(root string, p Pin) error {
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", p.Commit+"^{commit}").CombinedOutput(); err != nil {
		return fmt.Errorf("%w: commit %s (%s, molt %s) is not in this repository's history "+
			"(a shallow clone? fetch the full history: git fetch --unshallow): %v %s", ErrPin, p.Commit, p.File, p.Version, err, out)
	}
	return nil
}

// extract writes the commit's tree into dir (git archive | tar -x).
func extract(root string, p Pin, dir string) error {
	if err := checkCommit(root, p); err != nil {
		return err
	}
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", p.Commit)
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr, untar.Stderr = &stderr, &stderr
	if err := untar.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive %s: %v %s", p.Commit, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		return fmt.Errorf("tar -x of %s: %v %s", p.Commit, err, stderr.String())
	}
	return nil
}
