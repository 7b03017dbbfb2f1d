package version_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every binary answers --version with the version and commit the linker
// set, as a release build sets them (make release), and exits 0 without
// needing any other flag or configuration.
func TestBinariesPrintTheirVersion(t *testing.T) {
	out := t.TempDir()
	const pkg = "github.com/moltproject/molt/internal/version"
	build := exec.Command("go", "build", "-o", out+"/",
		"-ldflags", "-X "+pkg+".Version=9.8.7 -X "+pkg+".Commit=0123456789abcdef0123",
		"../../cmd/molt-coordinator", "../../cmd/molt-agent", "../../cmd/moltctl", "../../cmd/molt-lab")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	for _, bin := range []string{"molt-coordinator", "molt-agent", "moltctl", "molt-lab"} {
		b, err := exec.Command(filepath.Join(out, bin), "--version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --version: %v\n%s", bin, err, b)
		}
		got := strings.TrimSpace(string(b))
		if !strings.HasPrefix(got, "molt 9.8.7 (commit 0123456789ab, go") {
			t.Errorf("%s --version = %q, want the linker's version and commit", bin, got)
		}
	}
}
