package statemachine

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/raftstore/command"
)

// Every registered command number names the release that introduced it,
// and every number 0.1.0 registered (commit bb51d81) is 0.1.0: entries
// carry it (raft.Log.Extensions), and a member too old for an entry
// reports "needs molt ≥ X" from it.
func TestEveryCommandNamesItsRelease(t *testing.T) {
	for typ := range New().Handlers() {
		v, ok := CommandSince(typ)
		require.True(t, ok, "command %s has no release in commandSince", typ)
		if typ <= CmdPutChannel || typ == CmdAudited {
			require.Equal(t, "0.1.0", v, "command %s was in 0.1.0", typ)
		}
	}
	require.Len(t, commandSince, len(New().Handlers()), "no release for a number nobody registers")
	var _ raftstore.VersionedMachine = New()
	require.Equal(t, "0.1.0", MinVersion(PutReleaseCmd{}))
	a := AuditedCmd{CommandType: CmdPutRelease}
	require.Equal(t, "0.1.0", MinVersion(a))
	// An audited command of a release after 0.1.0 needs that release.
	commandSince[CmdPutRelease] = "0.2.0"
	t.Cleanup(func() { commandSince[CmdPutRelease] = command.BaselineVersion })
	require.Equal(t, "0.2.0", MinVersion(a))
}

// What a newer release writes and this one cannot read is returned as
// command.CannotRead — the replica halts there (raftstore) — never
// panicked on, never applied as something else, never refused as a
// domain rule. An unknown step layout was read as the newest before
// (the `>=` checks of phases), and an unknown command inside an audited
// envelope panicked.
func TestEntriesOfANewerReleaseCannotBeRead(t *testing.T) {
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	newer := phases.Options{StepLayout: phases.CurrentStepLayout + 1}
	inner, err := json.Marshal(map[string]any{"name": "x"})
	require.NoError(t, err)
	unknown := NewestCommand() + 1 // no release has it yet
	for name, c := range map[string]Command{
		"start upgrade, newer step layout": StartUpgradeCmd{Cluster: "c", To: phases.Version{Major: 1, Minor: 16, Patch: 1}, Options: newer, Now: now},
		"auto start, newer step layout":    AutoStartCmd{Cluster: "c", To: phases.Version{Major: 1, Minor: 16, Patch: 1}, Options: newer, Now: now},
		"audited, unknown command":         AuditedCmd{Record: AuditRecord{Time: now}, CommandType: unknown, Command: inner},
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := replay(t, readGoldenLog(t, goldenLogPath)[:3])
			was, err := f.Snapshot()
			require.NoError(t, err)
			b, err := raftstore.Encode(c)
			require.NoError(t, err)
			require.NotPanics(t, func() { _, err = f.Handlers()[c.Type()](100, b[1:]) })
			require.True(t, command.CannotRead(err), "cannot read: %v", err)
			require.ErrorIs(t, err, command.ErrCannotRead)
			after, err := f.Snapshot()
			require.NoError(t, err)
			requireSameBytes(t, was, after, "nothing changed")
		})
	}
}

// A snapshot of a newer format, or holding a newer step layout, cannot be
// read either: Restore says so (command.ErrCannotRead) and raftstore
// halts the replica instead of failing to start it.
func TestSnapshotsOfANewerReleaseCannotBeRead(t *testing.T) {
	golden, err := os.ReadFile(goldenSnapshotPath)
	require.NoError(t, err)
	nl := bytes.IndexByte(golden, '\n') + 1
	header, body := golden[:nl], golden[nl:]
	require.Equal(t, "molt-coordinator-snapshot 1\n", string(header))
	layout := bytes.Replace(body, []byte(`"stepLayout":3`), []byte(`"stepLayout":9`), 1)
	require.NotEqual(t, body, layout)
	for name, data := range map[string][]byte{
		"format 2":      append([]byte("molt-coordinator-snapshot 2\n"), body...),
		"step layout 9": append(append([]byte(nil), header...), layout...),
	} {
		t.Run(name, func(t *testing.T) {
			f := New()
			err := f.Restore(data)
			require.ErrorIs(t, err, command.ErrCannotRead)
			require.ErrorIs(t, err, raftstore.ErrBadSnapshot)
		})
	}
	require.NoError(t, New().Restore(golden), "the golden snapshot still restores")
}

// What the molt step adds to the log needs molt 0.2.0: a release's
// molt-agent, an upgrade's agent options, the molt step's actions and the
// agent result command; entries without them stay readable by 0.1.0, so
// the capability gate lets them through while a 0.1.0 member remains.
func TestMoltStepEntriesNeed020(t *testing.T) {
	withAgent := api.Release{Version: "1.34.6", Agent: &api.AgentArtifact{Version: "0.2.0"}}
	molt := phases.Options{StepLayout: phases.StepLayoutMolt, AgentVersion: "0.2.0"}
	for name, c := range map[string]Command{
		"a release's molt-agent":   PutReleaseCmd{Release: withAgent},
		"an upgrade's agent":       StartUpgradeCmd{Options: molt},
		"an automatic one's agent": AutoStartCmd{Options: molt},
		"an agent's start":         AdvanceCmd{Actions: []phases.Action{{Kind: phases.ActStartAgent}}},
		"the molt step's end":      AdvanceCmd{Actions: []phases.Action{{Kind: phases.ActCompleteStep, Step: phases.StepIDMolt}}},
		"an agent's result":        AgentResultCmd{},
	} {
		require.Equal(t, "0.2.0", MinVersion(c), name)
	}
	for name, c := range map[string]Command{
		"a release without":  PutReleaseCmd{Release: api.Release{Version: "1.34.6"}},
		"an upgrade without": StartUpgradeCmd{Options: phases.Options{StepLayout: phases.StepLayoutGates}},
		"a pool's start":     AdvanceCmd{Actions: []phases.Action{{Kind: phases.ActStartStep, Step: "pool/cp"}}},
	} {
		require.Equal(t, "0.1.0", MinVersion(c), name)
	}
}
