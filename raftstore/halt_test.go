package raftstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/raftstore/command"
)

// cannotReadMachine is a kvMachine whose Restore says it cannot read the
// snapshot (a newer Machine format), as coordinator/statemachine does.
type cannotReadMachine struct{ *kvMachine }

func (cannotReadMachine) Restore([]byte) error {
	return fmt.Errorf("%w: %w: machine format 2 is newer than this release reads", ErrBadSnapshot, command.ErrCannotRead)
}

// A replica that meets an entry it cannot read stops there: no panic, no
// refusal, nothing applied from that entry on, no snapshot; it says where
// and why, with the release the entry names. Before, an unknown command
// panicked, and an unknown field was refused — applied as a no-op here
// while newer members applied it, so the replicas differed.
func TestFSMHaltsOnEntryItCannotRead(t *testing.T) {
	withExt := func(l *raft.Log, v string) *raft.Log { l.Extensions = command.EncodeExtensions(v); return l }
	tests := []struct {
		name    string
		log     func(t *testing.T) *raft.Log
		typ     CommandType
		needs   string // HaltInfo.Needs()
		version string // the member's release; "" is 0.2.0
		detail  string
	}{
		{
			name:   "unknown command, no extensions (written by 0.1.0)",
			log:    func(t *testing.T) *raft.Log { return entry(t, 5, rawCmd{FirstDomainType + 50, 1}) },
			typ:    FirstDomainType + 50,
			needs:  "needs a newer molt (command 66)",
			detail: "command 66 is unknown to this release",
		},
		{
			name:   "unknown command naming its release",
			log:    func(t *testing.T) *raft.Log { return withExt(entry(t, 5, rawCmd{FirstDomainType + 50, 1}), "0.3.0") },
			typ:    FirstDomainType + 50,
			needs:  "needs molt ≥ 0.3.0",
			detail: "the entry needs molt 0.3.0 and this member runs 0.2.0",
		},
		{
			name: "unknown field in a known command",
			log: func(t *testing.T) *raft.Log {
				return withExt(entry(t, 5, rawCmd{cmdPut, json.RawMessage(`{"key":"a","value":"9","ttl":5}`)}), "0.3.0")
			},
			typ:     cmdPut,
			needs:   "needs molt ≥ 0.3.0",
			version: "0.3.0-dev", // reads 0.3.0's entries by version, not this field
			detail:  `unknown field "ttl"`,
		},
		{
			name: "a known command whose entry needs a newer release",
			log: func(t *testing.T) *raft.Log {
				return withExt(entry(t, 5, putBody{Key: "a", Value: "9"}), "0.10.0")
			},
			typ:     cmdPut,
			needs:   "needs molt ≥ 0.10.0",
			version: "0.9.4",
			detail:  "the entry needs molt 0.10.0 and this member runs 0.9.4",
		},
		{
			name: "the handler cannot read it",
			log: func(t *testing.T) *raft.Log {
				return entry(t, 5, rawCmd{cmdPut, json.RawMessage(`{"key":"a","value":"9"}`)})
			},
			typ:    cmdPut,
			needs:  "needs a newer molt (command 16)",
			detail: "step layout 9",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			kv := newKV()
			f, err := newFSM(kv, slog.New(slog.NewTextHandler(&logs, nil)))
			require.NoError(t, err)
			f.version = "0.2.0"
			if tt.version != "" {
				f.version = tt.version
			}
			halted := 0
			f.onHalt = func() { halted++ }
			require.Equal(t, applyResult{Value: uint64(3)}, f.Apply(entry(t, 3, putBody{Key: "a", Value: "1"})))
			if tt.name == "the handler cannot read it" {
				f.handlers[cmdPut] = func(uint64, []byte) (any, error) {
					return nil, fmt.Errorf("%w: step layout 9 is newer than this release knows", command.ErrCannotRead)
				}
			}

			var resp any
			require.NotPanics(t, func() { resp = f.Apply(tt.log(t)) })
			r, ok := resp.(applyResult)
			require.True(t, ok, "response %T", resp)
			require.ErrorIs(t, r.Err, ErrHalted)
			h := f.halt.Load()
			require.NotNil(t, h, "halted")
			require.Equal(t, uint64(5), h.Index)
			require.Equal(t, tt.typ, h.Type)
			require.Equal(t, tt.needs, h.Needs())
			require.Contains(t, h.Detail, tt.detail)
			require.Contains(t, h.String(), tt.needs)
			require.Equal(t, 1, halted, "told once")
			require.Contains(t, logs.String(), "level=ERROR")
			require.Contains(t, logs.String(), "index=5")

			// Nothing from the entry on is applied, whatever it is.
			require.Equal(t, uint64(3), f.applied.Load())
			f.handlers[cmdPut] = kv.put
			resp = f.Apply(entry(t, 6, putBody{Key: "b", Value: "2"}))
			require.ErrorIs(t, resp.(applyResult).Err, ErrHalted)
			require.Equal(t, map[string]kvEntry{"a": {Value: "1", Version: 3}}, kv.dump())
			require.Equal(t, uint64(3), f.applied.Load())
			require.Equal(t, 1, halted)

			// No snapshot: it would be labelled past the state it holds,
			// and compact away the log the upgraded binary replays.
			_, err = f.Snapshot()
			require.ErrorIs(t, err, ErrHalted)

			// A snapshot this release reads replaces everything, the
			// entry it stopped at included: it applies again.
			var b bytes.Buffer
			require.NoError(t, writeSnapshot(&b, snapshotData{index: 6, members: map[string]memberMeta{},
				machine: []byte(`{"a":{"value":"9","version":5},"b":{"value":"2","version":6}}`)}))
			require.NoError(t, f.Restore(io.NopCloser(&b)))
			require.Nil(t, f.halt.Load())
			require.Equal(t, applyResult{Value: uint64(7)}, f.Apply(entry(t, 7, putBody{Key: "c", Value: "3"})))
		})
	}
}

// A snapshot this release cannot read halts the replica rather than
// failing the restore: at start hashicorp/raft would refuse to open the
// member (or fall back to an older snapshot whose log is compacted), and
// from the leader it would be sent again for ever.
func TestFSMHaltsOnSnapshotItCannotRead(t *testing.T) {
	good := func(machine string) []byte {
		var b bytes.Buffer
		require.NoError(t, writeSnapshot(&b, snapshotData{index: 7, members: map[string]memberMeta{}, machine: []byte(machine)}))
		return b.Bytes()
	}
	for name, tt := range map[string]struct {
		data    []byte
		machine Machine
		detail  string
	}{
		"newer raftstore format": {
			data: append(append([]byte(snapshotMagic), 2), good(`{}`)[9:]...), machine: newKV(),
			detail: "raftstore snapshot format 2 is newer than this release reads (up to 1)",
		},
		"newer machine format": {
			data: good(`{}`), machine: cannotReadMachine{newKV()},
			detail: "machine format 2 is newer than this release reads",
		},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := newFSM(tt.machine, testLogger(t))
			require.NoError(t, err)
			f.Apply(entry(t, 3, putBody{Key: "a", Value: "1"}))
			require.NotPanics(t, func() { require.NoError(t, f.Restore(io.NopCloser(bytes.NewReader(tt.data)))) })
			h := f.halt.Load()
			require.NotNil(t, h)
			require.True(t, h.Snapshot)
			require.Equal(t, uint64(7), h.Index)
			require.Equal(t, "needs a newer molt (snapshot)", h.Needs())
			require.Contains(t, h.Detail, tt.detail)
			require.Equal(t, uint64(3), f.applied.Load(), "the state is the one before")
			_, err = f.Snapshot()
			require.ErrorIs(t, err, ErrHalted)
		})
	}
}

// The extension every entry carries: its format is pinned, because
// members of other releases read it.
func TestEntryExtensionsFormat(t *testing.T) {
	require.Equal(t, `{"minVersion":"0.2.0"}`, string(command.EncodeExtensions("0.2.0")))
	require.Nil(t, command.EncodeExtensions(""))
	require.Equal(t, "0.2.0", command.DecodeExtensions([]byte(`{"minVersion":"0.2.0","later":1}`)), "keys it does not know are ignored")
	for _, b := range []string{"", "garbage", `["0.2.0"]`, `{}`} {
		require.Empty(t, command.DecodeExtensions([]byte(b)), "%q names no version", b)
	}
	for _, c := range []struct {
		have, need  string
		below, okay bool
	}{
		{"0.1.0", "0.2.0", true, true},
		{"0.2.0-dev", "0.2.0", false, true}, // a build between releases reads its release's entries
		{"0.2.0", "0.2.0", false, true},
		{"0.10.0", "0.9.9", false, true},
		{"v1.0.0+abc", "0.99.0", false, true},
		{"0.2.0", "", false, false},
		{"devel", "0.2.0", false, false},
		{"0.2", "0.2.0", false, false},
	} {
		below, ok := command.VersionBelow(c.have, c.need)
		require.Equal(t, [2]bool{c.below, c.okay}, [2]bool{below, ok}, "%s below %s", c.have, c.need)
	}
}

// Every entry Store.Apply writes carries the lowest release that reads
// it: the Machine's for its commands, the baseline for raftstore's own.
func TestApplyWritesMinVersionInExtensions(t *testing.T) {
	n := newSoloLeader(t)
	put(t, n.s, "a", "1")
	_, err := n.s.Apply(ctx(t), tagBody{Key: "b", Tag: "x"})
	require.NoError(t, err)
	want := map[CommandType]string{cmdSetMember: "0.1.0", cmdPut: "0.1.0", cmdTag: "0.2.0"}
	got := map[CommandType]string{}
	first, err := n.s.logs.FirstIndex()
	require.NoError(t, err)
	last, err := n.s.logs.LastIndex()
	require.NoError(t, err)
	for i := first; i <= last; i++ {
		var l raft.Log
		require.NoError(t, n.s.logs.GetLog(i, &l))
		if l.Type != raft.LogCommand {
			continue
		}
		typ, _, err := Decode(l.Data)
		require.NoError(t, err)
		got[typ] = command.DecodeExtensions(l.Extensions)
	}
	require.Equal(t, want, got)
}

// The must-show of a mixed-version coordinator, on the store: a member
// whose binary lacks a command the others have is given an entry of it
// (no gate in the way: the leader proposes it regardless). It halts at
// that entry — no panic, no divergence, the reason names the release it
// needs — while the others go on writing; restarted with a binary that
// knows the command, it restores its last snapshot, replays its log and
// holds the same state as the others.
func TestMemberThatCannotReadHaltsThenCatchesUpWhenUpgraded(t *testing.T) {
	nodes := newCluster(t, 3, nil)
	want := map[string]kvEntry{}
	for i := range 5 {
		k := fmt.Sprintf("k%d", i)
		want[k] = kvEntry{Value: "v", Version: putAny(t, nodes, k, "v")}
	}
	// n2 goes back to the older release (a graceful close hands over
	// leadership if it had it).
	old := nodes[2]
	require.NoError(t, old.s.Close())
	old.openAs(t, true)
	waitKV(t, nodes, want)
	// Its last snapshot, before the entry it cannot read: the upgraded
	// binary starts from it and replays the log after it.
	require.NoError(t, old.s.Snapshot())

	var tagIndex uint64
	retryOnLeaderChange(t, nodes, func(l *node) error {
		v, err := l.s.Apply(ctx(t), tagBody{Key: "k0", Tag: "new"})
		if err == nil {
			tagIndex = v.(uint64)
		}
		return err
	})
	want["k0"] = kvEntry{Value: "tag:new", Version: tagIndex}

	waitFor(t, "the old member halts", func() bool { _, h := old.s.Halted(); return h })
	h, _ := old.s.Halted()
	require.Equal(t, tagIndex, h.Index)
	require.Equal(t, cmdTag, h.Type)
	require.Equal(t, "0.2.0", h.NeedsVersion)
	require.Equal(t, "needs molt ≥ 0.2.0", h.Needs())
	require.Less(t, old.s.AppliedIndex(), tagIndex)

	// The others go on; the halted member applies none of it, refuses
	// what a leader does, and takes no snapshot.
	rest := nodes[:2]
	for i := range 5 {
		k := fmt.Sprintf("after%d", i)
		want[k] = kvEntry{Value: "w", Version: putAny(t, nodes, k, "w")}
	}
	waitKV(t, rest, want)
	frozen := old.kv.dump()
	require.Equal(t, kvEntry{Value: "v", Version: want["k1"].Version}, frozen["k1"])
	require.NotContains(t, frozen, "after0")
	require.Equal(t, "v", frozen["k0"].Value, "the entry it cannot read is not applied")
	require.ErrorIs(t, old.s.Snapshot(), ErrHalted)
	_, err := old.s.ReadIndex(ctx(t))
	require.Error(t, err)
	waitFor(t, "the halted member has the whole log on disk", func() bool {
		last, err := old.s.logs.LastIndex()
		return err == nil && last >= want["after4"].Version
	})

	// Its binary replaced: it starts from its snapshot and the log.
	require.NoError(t, old.s.Close())
	old.openAs(t, false)
	waitKV(t, nodes, want)
	_, halted := old.s.Halted()
	require.False(t, halted)
	require.Equal(t, int32(1), old.kv.restores.Load(), "started from its last snapshot, then replayed the log")
	v := putAny(t, nodes, "last", "x")
	want["last"] = kvEntry{Value: "x", Version: v}
	waitKV(t, nodes, want)
}

// A halted member elected leader (its log may be the most complete)
// hands leadership to a member that reads the log.
func TestHaltedMemberHandsLeadershipOver(t *testing.T) {
	nodes := newCluster(t, 3, nil)
	old := nodes[2]
	require.NoError(t, old.s.Close())
	old.openAs(t, true)
	putAny(t, nodes, "a", "1")
	retryOnLeaderChange(t, nodes, func(l *node) error {
		_, err := l.s.Apply(ctx(t), tagBody{Key: "a", Tag: "new"})
		return err
	})
	waitFor(t, "the old member halts", func() bool { _, h := old.s.Halted(); return h })
	// Make it leader: the leader hands over to it by name.
	leader := waitLeader(t, nodes)
	require.NoError(t, leader.s.wait(ctx(t), leader.s.raft.LeadershipTransferToServer(raft.ServerID(old.cfg.NodeID), raft.ServerAddress(old.s.RaftAddr()))))
	waitFor(t, "a member that reads the log leads again", func() bool {
		for _, n := range nodes[:2] {
			if n.s.IsLeader() {
				return true
			}
		}
		return false
	})
	require.False(t, old.s.IsLeader())
	v := putAny(t, nodes, "b", "2")
	waitKV(t, nodes[:2], map[string]kvEntry{"a": {Value: "tag:new", Version: nodes[0].kv.dump()["a"].Version}, "b": {Value: "2", Version: v}})
}
