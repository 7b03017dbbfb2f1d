package scripts

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLowprioRunsInASessionOfItsOwnAtNice19: lowprio.sh runs its command
// in a new session at nice 19 and, where the kernel has autogroup, with
// that session's autogroup at nice 19 — the caller's own autogroup left as
// it was — and passes the command's exit code on. Only so does nice 19
// rank the job below the lab hosts' sessions (sched(7), "autogroup").
func TestLowprioRunsInASessionOfItsOwnAtNice19(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pgid")
	ownGroup, ownErr := os.ReadFile("/proc/self/autogroup")
	cmd := exec.Command("bash", "lowprio.sh", "sh", "-c", "cat /proc/self/stat; cat /proc/self/autogroup 2>/dev/null; exit 7")
	cmd.Env = append(os.Environ(), "LOWPRIO_PIDFILE="+pidfile)
	out, err := cmd.Output()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v", err)
	require.Equal(t, 7, exit.ExitCode(), "the command's exit code")

	lines := strings.Split(string(out), "\n")
	stat := statFields(lines[0])
	session, err := strconv.Atoi(stat[3])
	require.NoError(t, err)
	self, err := os.ReadFile("/proc/self/stat")
	require.NoError(t, err)
	require.NotEqual(t, statFields(string(self))[3], stat[3], "a session of its own")
	require.Equal(t, stat[2], stat[3], "the session is its process group")
	require.Equal(t, "19", stat[16], "nice")
	b, err := os.ReadFile(pidfile)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(session), strings.TrimSpace(string(b)), "LOWPRIO_PIDFILE names the session")

	if ownErr != nil {
		t.Logf("no autogroup here (%v): nice 19 is all there is", ownErr)
		return
	}
	group := regexp.MustCompile(`^/autogroup-(\d+) nice (-?\d+)$`)
	m := group.FindStringSubmatch(strings.TrimSpace(lines[1]))
	require.NotNil(t, m, "the command's autogroup: %q", lines[1])
	require.Equal(t, "19", m[2], "its autogroup's nice")
	// The kernel prints nothing for the root autogroup: a caller whose
	// session descends from init's without a setsid (a CI runner started
	// that way) reads an empty file, and any /autogroup-N is then one of
	// the command's own.
	if strings.TrimSpace(string(ownGroup)) != "" {
		own := group.FindStringSubmatch(strings.TrimSpace(string(ownGroup)))
		require.NotNil(t, own, "the caller's autogroup: %q", ownGroup)
		require.NotEqual(t, own[1], m[1], "an autogroup of its own")
	}
	after, err := os.ReadFile("/proc/self/autogroup")
	require.NoError(t, err)
	require.Equal(t, string(ownGroup), string(after), "the caller's autogroup is left as it was")
}

// statFields are the fields of a /proc/PID/stat line after the command
// name: state ppid pgrp session ..., nice at index 16 (field 19).
func statFields(line string) []string {
	return strings.Fields(line[strings.LastIndex(line, ")")+1:])
}

// TestCheckBesideTheDemoRunsAtLowestPriority: test-all.sh starts the
// checks and the race build beside the demo through lowprio.sh.
func TestCheckBesideTheDemoRunsAtLowestPriority(t *testing.T) {
	b, err := os.ReadFile("test-all.sh")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^\s*LOWPRIO_PIDFILE="\$BIN/check.pgid" bash scripts/lowprio.sh "\$MAKE" --no-print-directory check prebuild-test `, string(b))
}
