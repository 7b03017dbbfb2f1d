// Package testenv decides what a test does when a real component it needs
// (containerd, systemd-nspawn, kube-apiserver, promtool, root) is missing.
//
// Under CI=true the test fails: CI installs every component, so a missing one
// is a broken install step, never a reason to pass. On a developer machine
// the test is skipped with a message that says what to install.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run under CI (CI=true).
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing fails the test under CI and skips it elsewhere, naming what is missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf("required component missing under CI=true: "+format, args...)
	}
	t.Skipf("required component missing (install it or run .ci/run): "+format, args...)
}

// RequireBinary returns the path of an executable on PATH, or fails/skips.
func RequireBinary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s not on PATH", name)
	}
	return p
}

// RequireFile returns path if it exists, or fails/skips.
func RequireFile(t testing.TB, path, what string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, "%s (%s): %v", what, path, err)
	}
	return path
}

// RequireRoot fails/skips unless the test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root privileges")
	}
}
