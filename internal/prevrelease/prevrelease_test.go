package prevrelease

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The repository's pin files read, and a malformed one says what it wants.
func TestRead(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, f := range []string{"build/previous-release", "build/previous-agent-release"} {
		p, err := Read(root, f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if p.File != f || len(p.Commit) != 40 || p.Version == "" {
			t.Errorf("%s: %+v", f, p)
		}
	}
	p, _ := Read(root, "build/previous-agent-release")
	if !strings.HasPrefix(p.Version, "0.2.0-") {
		t.Errorf("the agent pin %q is a pre-release of 0.2.0, the first release whose agent updates itself", p.Version)
	}

	dir := t.TempDir()
	for name, text := range map[string]string{
		"short":      "commit abc\nversion 0.1.0\n",
		"no-version": "commit " + strings.Repeat("a", 40) + "\n",
		"not-hex":    "commit " + strings.Repeat("g", 40) + "\nversion 0.1.0\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Read(dir, name)
		if !errors.Is(err, ErrPin) || !strings.Contains(err.Error(), "want a line `commit <40 hex digits>`") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Read(dir, "missing"); !errors.Is(err, ErrPin) {
		t.Errorf("missing: %v", err)
	}
}

// A cached binary counts only when the linker stamped the pin's version:
// this test's own binary carries no such stamp.
func TestStampedWith(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if stampedWith(self, "0.1.0") {
		t.Error("an unstamped binary counted as stamped")
	}
	if stampedWith(filepath.Join(t.TempDir(), "none"), "0.1.0") {
		t.Error("a missing binary counted as stamped")
	}
}
