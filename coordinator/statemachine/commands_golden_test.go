package statemachine

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
	{"putRelease", CmdPutRelease, 16},
	{"putCluster", CmdPutCluster, 17},
	{"deleteCluster", CmdDeleteCluster, 18},
	{"startUpgrade", CmdStartUpgrade, 19},
	{"advance", CmdAdvance, 20},
	{"nodeStepResult", CmdNodeStepResult, 21},
	{"stepResult", CmdStepResult, 22},
	{"poolCommand", CmdPoolCommand, 23},
	{"retryNode", CmdRetryNode, 24},
	{"agentRegister", CmdAgentRegister, 25},
	{"agentHealth", CmdAgentHealth, 26},
	{"setProtection", CmdSetProtection, 27},
	{"setPolicy", CmdSetPolicy, 28},
	{"preflightStart", CmdPreflightStart, 29},
	{"preflightResult", CmdPreflightResult, 30},
	{"preflightFinish", CmdPreflightFinish, 31},
	{"putToken", CmdPutToken, 32},
	{"deleteToken", CmdDeleteToken, 33},
	{"enrollAgent", CmdEnrollAgent, 34},
	{"renewAgentCert", CmdRenewAgentCert, 35},
	{"appendAudit", CmdAppendAudit, 36},
	{"rewrapSecrets", CmdRewrapSecrets, 37},
	{"poolWorkResult", CmdPoolWorkResult, 38},
	{"audited", CmdAudited, 47},
	{"autoStart", CmdAutoStart, 39},
	{"autoRecord", CmdAutoRecord, 40},
	{"putChannel", CmdPutChannel, 41},
	{"setMembers", CmdSetMembers, 42},
	{"preflightResults", CmdPreflightResults, 48},
	{"agentResult", CmdAgentResult, 45},
	{"putSequence", CmdPutSequence, 43},
	{"sequenceOverride", CmdSequenceOverride, 44},
	{"backup", CmdBackup, 49},
	{"agentsMissing", CmdAgentsMissing, 50},
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
	for typ := range New().Handlers() {
		got = append(got, typ)
	}
	slices.Sort(got)
	slices.Sort(want)
	require.Equal(t, want, got, "registered command types (fsm.go Handlers) must be exactly the pinned ones")
}
