package version

import (
	"strings"
	"testing"
)

func TestStringNamesVersionCommitAndGo(t *testing.T) {
	i := Info{Version: "0.2.0", Commit: "0123456789abcdef", GoVersion: "go1.26.8"}
	if got, want := i.String(), "molt 0.2.0 (commit 0123456789ab, go1.26.8)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if got := (Info{Version: "0.2.0-dev", GoVersion: "go1"}).String(); !strings.Contains(got, "commit unknown") {
		t.Fatalf("String() without a commit = %q, want it to say the commit is unknown", got)
	}
}

func TestLinkerCommitWins(t *testing.T) {
	old := Commit
	t.Cleanup(func() { Commit = old })
	Commit = "feedface"
	if got := Get().Commit; got != "feedface" {
		t.Fatalf("Get().Commit = %q, want the linker's %q", got, "feedface")
	}
}
