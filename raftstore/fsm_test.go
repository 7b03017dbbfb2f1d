package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

func newTestFSM(t *testing.T) (*fsm, *kvMachine) {
	t.Helper()
	kv := newKV()
	f, err := newFSM(kv, testLogger(t))
	require.NoError(t, err)
	return f, kv
}

func entry(t *testing.T, index uint64, c Command) *raft.Log {
	t.Helper()
	b, err := Encode(c)
	require.NoError(t, err)
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: b}
}

func TestFSMApply(t *testing.T) {
	unknownFlagged := (FirstDomainType + 50) | IgnoreUnknown
	unknownPlain := FirstDomainType + 50

	tests := []struct {
		name      string
		log       func(t *testing.T) *raft.Log
		wantPanic bool
		wantNil   bool // response is nil: entry skipped
		wantErr   error
		wantKV    map[string]kvEntry
	}{
		{
			name:   "known command applies",
			log:    func(t *testing.T) *raft.Log { return entry(t, 5, putBody{Key: "a", Value: "2"}) },
			wantKV: map[string]kvEntry{"a": {Value: "2", Version: 5}},
		},
		{
			name: "stale command is refused and changes nothing",
			log: func(t *testing.T) *raft.Log {
				return entry(t, 5, putBody{Key: "a", Value: "2", ExpectedVersion: ptr[uint64](9)})
			},
			wantErr: errStale,
			wantKV:  map[string]kvEntry{"a": {Value: "1", Version: 3}},
		},
		{
			name:    "unknown type with IgnoreUnknown is skipped",
			log:     func(t *testing.T) *raft.Log { return entry(t, 5, rawCmd{unknownFlagged, 1}) },
			wantNil: true,
			wantKV:  map[string]kvEntry{"a": {Value: "1", Version: 3}},
		},
		{
			name:    "unknown type without the flag halts the replica",
			log:     func(t *testing.T) *raft.Log { return entry(t, 5, rawCmd{unknownPlain, 1}) },
			wantErr: ErrHalted,
			wantKV:  map[string]kvEntry{"a": {Value: "1", Version: 3}},
		},
		{
			name:      "empty entry panics",
			log:       func(*testing.T) *raft.Log { return &raft.Log{Index: 5} },
			wantPanic: true,
		},
		{
			name:      "type zero panics",
			log:       func(*testing.T) *raft.Log { return &raft.Log{Index: 5, Data: []byte{0, '{', '}'}} },
			wantPanic: true,
		},
		{
			name:      "corrupt internal body panics",
			log:       func(*testing.T) *raft.Log { return &raft.Log{Index: 5, Data: []byte{byte(cmdSetMember), '{'}} },
			wantPanic: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, kv := newTestFSM(t)
			// Start from one committed write at index 3.
			require.Equal(t, applyResult{Value: uint64(3)}, f.Apply(entry(t, 3, putBody{Key: "a", Value: "1"})))

			l := tt.log(t)
			if tt.wantPanic {
				require.Panics(t, func() { f.Apply(l) })
				return
			}
			resp := f.Apply(l)
			if tt.wantNil {
				require.Nil(t, resp)
			} else {
				r, ok := resp.(applyResult)
				require.True(t, ok, "response %T", resp)
				if tt.wantErr != nil {
					require.ErrorIs(t, r.Err, tt.wantErr)
				} else {
					require.NoError(t, r.Err)
				}
			}
			require.Equal(t, tt.wantKV, kv.dump())
			if errors.Is(tt.wantErr, ErrHalted) {
				require.Equal(t, uint64(3), f.applied.Load(), "a halted replica does not count the entry it stopped at")
				return
			}
			require.Equal(t, uint64(5), f.applied.Load(), "applied index moves even for refused and skipped entries")
		})
	}
}

func TestNewFSMChecksRegistry(t *testing.T) {
	tests := []struct {
		name     string
		handlers map[CommandType]ApplyFunc
	}{
		{"reserved type", map[CommandType]ApplyFunc{cmdSetMember: newKV().put}},
		{"reserved type with flag", map[CommandType]ApplyFunc{15 | IgnoreUnknown: newKV().put}},
		{"nil handler", map[CommandType]ApplyFunc{cmdPut: nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newFSM(registryMachine{tt.handlers}, slog.New(slog.DiscardHandler))
			require.Error(t, err)
		})
	}
	_, err := newFSM(nil, slog.New(slog.DiscardHandler))
	require.Error(t, err)
}

type registryMachine struct{ h map[CommandType]ApplyFunc }

func (m registryMachine) Handlers() map[CommandType]ApplyFunc { return m.h }
func (registryMachine) Snapshot() ([]byte, error)             { return nil, nil }
func (registryMachine) Restore([]byte) error                  { return nil }

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

func TestFSMSnapshotRestoreRoundTrip(t *testing.T) {
	src, srcKV := newTestFSM(t)
	src.Apply(entry(t, 2, setMemberBody{ID: "n0", RaftAddr: "127.0.0.1:1", HTTPAddr: "n0:8443"}))
	src.Apply(entry(t, 3, putBody{Key: "a", Value: "1"}))
	src.Apply(entry(t, 4, putBody{Key: "b", Value: "2"}))
	src.Apply(entry(t, 5, setMemberBody{ID: "n1", RaftAddr: "127.0.0.1:2", HTTPAddr: "n1:8443"}))

	snap, err := src.Snapshot()
	require.NoError(t, err)
	// Writes after the snapshot was taken must not leak into it.
	src.Apply(entry(t, 6, putBody{Key: "c", Value: "3"}))
	var sink memSink
	require.NoError(t, snap.Persist(&sink))
	snap.Release()

	dst, dstKV := newTestFSM(t)
	dst.Apply(entry(t, 1, putBody{Key: "old", Value: "gone"}))
	require.NoError(t, dst.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))))

	want := srcKV.dump()
	delete(want, "c")
	require.Equal(t, want, dstKV.dump())
	require.Equal(t, map[string]memberMeta{
		"n0": {RaftAddr: "127.0.0.1:1", HTTPAddr: "n0:8443"},
		"n1": {RaftAddr: "127.0.0.1:2", HTTPAddr: "n1:8443"},
	}, dst.memberSnapshot())
	require.Equal(t, uint64(5), dst.applied.Load())
}

func TestFSMRestoreRefusesBadSnapshotAndKeepsState(t *testing.T) {
	good := func() []byte {
		var b bytes.Buffer
		require.NoError(t, writeSnapshot(&b, snapshotData{index: 7, members: map[string]memberMeta{}, machine: []byte(`{}`)}))
		return b.Bytes()
	}()
	tests := map[string][]byte{
		"empty":               nil,
		"bad magic":           append([]byte("NOTASNAP"), good[8:]...),
		"version 0":           append(append([]byte(snapshotMagic), 0), good[9:]...),
		"truncated":           good[:len(good)-1],
		"unknown section":     append(append([]byte(nil), good...), 0x7f, 0, 0, 0, 0, 0, 0, 0, 0),
		"missing sections":    good[:17],
		"bad members json":    append(append([]byte(nil), good[:17]...), sectionMembers, 0, 0, 0, 0, 0, 0, 0, 1, '{', sectionMachine, 0, 0, 0, 0, 0, 0, 0, 0),
		"huge section length": append(append([]byte(nil), good[:17]...), sectionMachine, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			f, kv := newTestFSM(t)
			f.Apply(entry(t, 3, putBody{Key: "a", Value: "1"}))
			err := f.Restore(io.NopCloser(bytes.NewReader(data)))
			require.ErrorIs(t, err, ErrBadSnapshot)
			require.Equal(t, map[string]kvEntry{"a": {Value: "1", Version: 3}}, kv.dump())
			require.Equal(t, uint64(3), f.applied.Load())
		})
	}
	t.Run("machine refuses its bytes", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, writeSnapshot(&b, snapshotData{index: 7, members: map[string]memberMeta{"x": {}}, machine: []byte(`not json`)}))
		f, _ := newTestFSM(t)
		require.Error(t, f.Restore(io.NopCloser(&b)))
		require.Empty(t, f.memberSnapshot(), "members are not swapped in when the machine refuses")
	})
}

func TestSnapshotFormatIsStable(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeSnapshot(&b, snapshotData{index: 1, members: map[string]memberMeta{}, machine: []byte("M")}))
	members, _ := json.Marshal(map[string]memberMeta{})
	want := []byte("MOLTSNAP\x01\x00\x00\x00\x00\x00\x00\x00\x01")
	want = append(want, sectionMembers, 0, 0, 0, 0, 0, 0, 0, byte(len(members)))
	want = append(want, members...)
	want = append(want, sectionMachine, 0, 0, 0, 0, 0, 0, 0, 1, 'M')
	require.Equal(t, want, b.Bytes())
}

// The call counter the watchdog reads (Store.FSMCall): 0 between calls,
// a number of its own for each call while it is in progress.
func TestFSMCallInProgress(t *testing.T) {
	f, _ := newTestFSM(t)
	var seen []uint64
	f.hook = func() { seen = append(seen, f.inCall.Load()) }
	require.Zero(t, f.inCall.Load(), "idle")
	f.Apply(entry(t, 1, putBody{Key: "a", Value: "1"}))
	require.Zero(t, f.inCall.Load(), "between calls")
	snap, err := f.Snapshot()
	require.NoError(t, err)
	require.Zero(t, f.inCall.Load())
	f.Apply(entry(t, 2, putBody{Key: "b", Value: "2"}))
	require.Zero(t, f.inCall.Load())
	require.Equal(t, []uint64{1, 3}, seen, "each Apply seen in progress under its own number; the Snapshot between them took 2")

	var sink memSink
	require.NoError(t, snap.Persist(&sink))
	require.NoError(t, f.Restore(io.NopCloser(&sink.Buffer)))
	require.Zero(t, f.inCall.Load(), "after a restore")
	require.Equal(t, uint64(4), f.calls.Load())
}

// An internal body with a field this release does not declare (a newer
// release wrote it) halts the replica: nothing changes, nothing after it
// is applied, and the member logs why with the index, the type and the
// field; it does not panic. Before bodies were decoded strictly, the field
// was dropped and the rest applied; then the entry was refused, which left
// this replica behind the newer members that applied it.
func TestFSMHaltsOnUnknownFieldInInternalCommand(t *testing.T) {
	for name, body := range map[string]string{
		"set member":    `{"id":"n0","raft_addr":"127.0.0.1:9","http_addr":"n0:9","zone":"b"}`,
		"remove member": `{"id":"n0","zone":"b"}`,
	} {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			f, err := newFSM(newKV(), slog.New(slog.NewTextHandler(&logs, nil)))
			require.NoError(t, err)
			require.Equal(t, applyResult{}, f.Apply(entry(t, 2, setMemberBody{ID: "n0", RaftAddr: "127.0.0.1:1", HTTPAddr: "n0:8443"})))
			typ := cmdSetMember
			if name == "remove member" {
				typ = cmdRemoveMember
			}
			var resp any
			require.NotPanics(t, func() { resp = f.Apply(entry(t, 5, rawCmd{typ, json.RawMessage(body)})) })
			r, ok := resp.(applyResult)
			require.True(t, ok, "response %T", resp)
			require.ErrorIs(t, r.Err, ErrHalted)
			require.ErrorContains(t, r.Err, `"zone"`)
			require.Equal(t, map[string]memberMeta{"n0": {RaftAddr: "127.0.0.1:1", HTTPAddr: "n0:8443"}}, f.memberSnapshot(), "nothing changed")
			h := f.halt.Load()
			require.NotNil(t, h)
			require.Equal(t, uint64(5), h.Index)
			require.Equal(t, typ, h.Type)
			require.Contains(t, logs.String(), "index=5")
			require.Contains(t, logs.String(), "type="+typ.String())
			require.Contains(t, logs.String(), `unknown field \"zone\"`)
		})
	}
}

// The members section of a snapshot decodes strictly too: a restore that
// meets a field this release does not know halts the replica and keeps
// the state.
func TestFSMRestoreHaltsOnUnknownFieldInMembers(t *testing.T) {
	members := []byte(`{"n0":{"raft_addr":"127.0.0.1:1","http_addr":"n0:8443","zone":"b"}}`)
	data := []byte("MOLTSNAP\x01\x00\x00\x00\x00\x00\x00\x00\x07")
	data = append(data, sectionMembers, 0, 0, 0, 0, 0, 0, 0, byte(len(members)))
	data = append(data, members...)
	data = append(data, sectionMachine, 0, 0, 0, 0, 0, 0, 0, 2, '{', '}')

	f, kv := newTestFSM(t)
	f.Apply(entry(t, 3, putBody{Key: "a", Value: "1"}))
	require.NoError(t, f.Restore(io.NopCloser(bytes.NewReader(data))))
	h := f.halt.Load()
	require.NotNil(t, h)
	require.True(t, h.Snapshot)
	require.Equal(t, uint64(7), h.Index)
	require.Contains(t, h.Detail, `"zone"`)
	require.Equal(t, map[string]kvEntry{"a": {Value: "1", Version: 3}}, kv.dump())
	require.Equal(t, uint64(3), f.applied.Load())
}
