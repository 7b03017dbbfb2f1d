// Package hosttest is what tests that boot systemd-nspawn hosts
// (internal/nspawn) share: the check that this machine can boot one —
// failing under CI=true and skipping elsewhere when it cannot
// (internal/testenv) — booting a host that stops at the test's end and
// shows its units' journals when the test failed, and building molt's
// binaries to install into it.
package hosttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/nspawn"
	"github.com/moltproject/molt/internal/testenv"
)

// Require needs root and the tools that build a rootfs and boot and enter
// a host, plus binaries (e.g. "go").
func Require(t testing.TB, binaries ...string) {
	t.Helper()
	testenv.RequireRoot(t)
	for _, b := range append([]string{"debootstrap", "systemd-nspawn", "nsenter"}, binaries...) {
		testenv.RequireBinary(t, b)
	}
}

// Boot boots a host, stopped when the test ends. If the test failed by
// then, the last lines of the journal of units (every unit when none is
// named) go to the test log first.
func Boot(t testing.TB, ctx context.Context, cfg nspawn.BootConfig, units ...string) *nspawn.Host {
	t.Helper()
	h, err := nspawn.Boot(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			args := []string{"journalctl", "--no-pager", "-n", "200"}
			for _, u := range units {
				args = append(args, "-u", u)
			}
			o, _ := h.Exec(context.Background(), args...)
			t.Logf("journal of %s:\n%s", h.Name(), o)
		}
		_ = h.Stop()
	})
	return h
}

// GoBuild runs `go build -o out args... .` in dir, statically linked
// (CGO_ENABLED=0) so the binary runs in any host.
func GoBuild(t testing.TB, dir, out string, args ...string) {
	t.Helper()
	cmd := exec.Command("go", append(append([]string{"build", "-o", out}, args...), ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))
}

// FileSum is the hex SHA-256 of a file's content.
func FileSum(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// MakeRelease runs `make release` in the repository at repo with BIN=bin,
// so the artifacts land in bin/release, and returns that directory. The
// binaries are built without -trimpath (RELEASE_BUILDFLAGS empty), so they
// reuse the packages the tests' own builds compiled; everything else is as
// a release is made.
func MakeRelease(t testing.TB, repo, bin string) string {
	t.Helper()
	testenv.RequireBinary(t, "make")
	cmd := exec.Command("make", "--no-print-directory", "-C", repo, "release", "BIN="+bin, "RELEASE_BUILDFLAGS=")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "make release:\n%s", b)
	return filepath.Join(bin, "release")
}
