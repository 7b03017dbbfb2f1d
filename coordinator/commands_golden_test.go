package coordinator

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/raftstore"
)

// pinnedCommands is every coordinator command type with its number, as
// released. Logs and snapshots on disk carry these numbers: a row is never
// changed or removed, and a number is never given to another command. A new
// command gets a new row (and a new constant in commands.go).
var pinnedCommands = []struct {
	name string
	typ  raftstore.CommandType
	want uint8
}{
	{"putRelease", cmdPutRelease, 16},
	{"putCluster", cmdPutCluster, 17},
	{"deleteCluster", cmdDeleteCluster, 18},
	{"startUpgrade", cmdStartUpgrade, 19},
	{"advance", cmdAdvance, 20},
	{"nodeStepResult", cmdNodeStepResult, 21},
	{"stepResult", cmdStepResult, 22},
	{"poolCommand", cmdPoolCommand, 23},
	{"retryNode", cmdRetryNode, 24},
	{"agentRegister", cmdAgentRegister, 25},
	{"agentHealth", cmdAgentHealth, 26},
	{"setProtection", cmdSetProtection, 27},
	{"setPolicy", cmdSetPolicy, 28},
	{"preflightStart", cmdPreflightStart, 29},
	{"preflightResult", cmdPreflightResult, 30},
	{"preflightFinish", cmdPreflightFinish, 31},
}

// TestGoldenCommandNumbers pins every command number, and checks that the
// registry holds exactly the pinned numbers: a command registered without
// a row here fails, and so does a row whose command is no longer handled.
func TestGoldenCommandNumbers(t *testing.T) {
	var want []raftstore.CommandType
	for _, c := range pinnedCommands {
		require.Equal(t, c.want, uint8(c.typ), "command %s was renumbered", c.name)
		require.False(t, slices.Contains(want, c.typ), "number %d used twice", c.want)
		want = append(want, c.typ)
	}
	var got []raftstore.CommandType
	for typ := range newFSM().Handlers() {
		got = append(got, typ)
	}
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got, "registered command types (fsm.go Handlers) must be exactly the pinned ones")
}
