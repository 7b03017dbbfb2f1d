package statemachine

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/raftstore"
)

// withField returns a JSON object with one more member, "zzNewField",
// as a newer release that added a field to the object would write it.
func withField(t *testing.T, obj []byte) []byte {
	t.Helper()
	require.True(t, bytes.HasPrefix(obj, []byte("{")) && !bytes.HasPrefix(obj, []byte("{}")), "a non-empty object: %s", obj)
	return append([]byte(`{"zzNewField":true,`), obj[1:]...)
}

// TestUnknownFieldRefusesTheCommand: for every command number, the body
// of a command the golden log applies, with one field its persisted form
// does not declare, is refused where the command alone would apply:
// with an error naming the command and the field, without a panic, and
// changing nothing. Before bodies were decoded strictly, the field was
// dropped and the command applied.
func TestUnknownFieldRefusesTheCommand(t *testing.T) {
	entries := goldenEntries()
	seen := map[raftstore.CommandType]bool{}
	for at, e := range entries {
		typ := e.cmd.Type()
		if seen[typ] || e.refused != nil {
			continue
		}
		seen[typ] = true
		t.Run(fmt.Sprintf("%d %T", typ, e.cmd), func(t *testing.T) {
			b, err := raftstore.Encode(e.cmd)
			require.NoError(t, err)
			requireRefusedUnknownField(t, entries[:at], typ, typ, withField(t, b[1:]))
		})
	}
	require.Len(t, seen, len(New().Handlers()), "every command number is tried")
}

// TestUnknownNestedFieldRefusesTheCommand: strictness reaches nested
// objects, and the command inside an AuditedCmd.
func TestUnknownNestedFieldRefusesTheCommand(t *testing.T) {
	entries := goldenEntries()
	first := func(typ raftstore.CommandType) int {
		for i, e := range entries {
			if e.cmd.Type() == typ && e.refused == nil {
				return i
			}
		}
		t.Fatalf("no applied command %s in the golden log", typ)
		return 0
	}

	t.Run("release inside putRelease", func(t *testing.T) {
		at := first(CmdPutRelease)
		b, err := raftstore.Encode(entries[at].cmd)
		require.NoError(t, err)
		body := bytes.Replace(b[1:], []byte(`"release":{`), []byte(`"release":{"zzNewField":true,`), 1)
		require.NotEqual(t, b[1:], body)
		requireRefusedUnknownField(t, entries[:at], CmdPutRelease, CmdPutRelease, body)
	})

	t.Run("command inside audited", func(t *testing.T) {
		at := first(CmdAudited)
		c := entries[at].cmd.(AuditedCmd)
		c.Command = withField(t, c.Command)
		b, err := raftstore.Encode(c)
		require.NoError(t, err)
		requireRefusedUnknownField(t, entries[:at], CmdAudited, c.CommandType, b[1:])
	})
}

// requireRefusedUnknownField applies body as a command of type typ to
// the state prefix leaves, and requires the refusal of "zzNewField" in
// the command named (typ, or the command inside an AuditedCmd).
func requireRefusedUnknownField(t *testing.T, prefix []goldenEntry, typ, named raftstore.CommandType, body []byte) {
	t.Helper()
	f, _ := replay(t, encodeEntries(t, prefix, 1))
	was, err := f.Snapshot()
	require.NoError(t, err)
	index := uint64(len(prefix) + 1)
	require.NotPanics(t, func() { _, err = f.Handlers()[typ](index, body) })
	require.ErrorIs(t, err, raftstore.ErrUnknownField)
	require.ErrorContains(t, err, fmt.Sprintf("command %s at index %d", named, index))
	require.ErrorContains(t, err, `unknown field "zzNewField"`)
	after, err := f.Snapshot()
	require.NoError(t, err)
	requireSameBytes(t, was, after, "a refused command changes nothing")
}

// TestSnapshotWithUnknownFieldIsRefused: a snapshot naming a field this
// release does not declare (at the top or nested) does not restore, and
// the state stays as it was.
func TestSnapshotWithUnknownFieldIsRefused(t *testing.T) {
	golden, err := os.ReadFile(goldenSnapshotPath)
	require.NoError(t, err)
	nl := bytes.IndexByte(golden, '\n') + 1
	header, body := golden[:nl], golden[nl:]
	nested := bytes.Replace(body, []byte(`"spec":{`), []byte(`"spec":{"zzNewField":true,`), 1)
	require.NotEqual(t, body, nested)
	for name, data := range map[string][]byte{
		"top level": append(append([]byte(nil), header...), withField(t, body)...),
		"nested":    append(append([]byte(nil), header...), nested...),
	} {
		t.Run(name, func(t *testing.T) {
			f, _ := replay(t, readGoldenLog(t, goldenLogPath)[:3])
			was, err := f.Snapshot()
			require.NoError(t, err)
			err = f.Restore(data)
			require.ErrorIs(t, err, raftstore.ErrBadSnapshot)
			require.ErrorIs(t, err, raftstore.ErrUnknownField)
			require.ErrorContains(t, err, `unknown field "zzNewField"`)
			after, err := f.Snapshot()
			require.NoError(t, err)
			requireSameBytes(t, was, after, "a refused snapshot changes nothing")
		})
	}
}
