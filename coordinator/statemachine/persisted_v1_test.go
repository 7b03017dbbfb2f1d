package statemachine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/filltest"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/raftstore"
)

// The tests of the persisted format beside the golden log (golden_test.go):
// conversions between the V1 types and what the state machine keeps lose
// no field, in either direction, and every V1 field's encoding is pinned
// (testdata/persisted-v1/), which the golden log, realistic as it is, does
// not reach (MIG pool settings, every operation kind, exclusions, …).

// filler fills both sides with values the conversions accept: an engine
// version is 1.N.N, a string that holds a version (From, To, Target,
// …Version) is one in text, and raw JSON is a JSON object.
// knownLayouts sets every StepLayout field reachable from v (a pointer)
// to phases.CurrentStepLayout: a filled value has a step layout no
// release knows, which cannot be read (readable_test.go), and the
// conversions are what these tests judge.
func knownLayouts(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			knownLayouts(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if !f.CanSet() {
				continue
			}
			if v.Type().Field(i).Name == "StepLayout" && f.Kind() == reflect.Int {
				f.SetInt(phases.CurrentStepLayout)
				continue
			}
			knownLayouts(f)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			knownLayouts(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			knownLayouts(e)
			v.SetMapIndex(k, e)
		}
	}
}

func filler() *filltest.Filler {
	return &filltest.Filler{
		Types: map[reflect.Type]func(int) any{
			reflect.TypeFor[phases.Version](): func(n int) any { return phases.Version{Major: 1, Minor: n, Patch: n} },
			// A command inside an AuditedCmd: any JSON value.
			reflect.TypeFor[json.RawMessage](): func(n int) any { return json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)) },
		},
		Fields: func(name string, n int) (string, bool) {
			if name == "From" || name == "To" || name == "Target" || name == "AutoUpgradeTarget" || strings.HasSuffix(name, "Version") {
				return fmt.Sprintf("1.%d.%d", n, n), true
			}
			return "", false
		},
	}
}

// commandsByType returns one command of each registered type, from the
// golden entries (TestGoldenCommands requires one of each there).
func commandsByType(t *testing.T) map[raftstore.CommandType]Command {
	t.Helper()
	out := map[raftstore.CommandType]Command{}
	for _, e := range goldenEntries() {
		if _, ok := out[e.cmd.Type()]; !ok {
			out[e.cmd.Type()] = e.cmd
		}
	}
	require.Len(t, out, len(New().Handlers()), "goldenEntries holds a command of each registered type")
	return out
}

// TestCommandsConvertLosslessly fills every field of each command and of
// its persisted form, and sends each through the other and back, as the
// log does (JSON): a field added to either side and not converted fails.
func TestCommandsConvertLosslessly(t *testing.T) {
	for _, sample := range commandsByType(t) {
		t.Run(fmt.Sprintf("%T", sample), func(t *testing.T) {
			cmdType := reflect.TypeOf(sample)
			cmd := reflect.New(cmdType)
			filler().Fill(cmd.Interface())
			knownLayouts(cmd)
			b, err := raftstore.Encode(cmd.Elem().Interface().(Command))
			require.NoError(t, err)
			_, body, err := raftstore.Decode(b)
			require.NoError(t, err)
			back := reflect.New(cmdType)
			require.NoError(t, json.Unmarshal(body, back.Interface()))
			require.Equal(t, cmd.Interface(), back.Interface(), "command → log → command")

			v1 := reflect.New(reflect.TypeOf(sample.persistedV1()))
			filler().Fill(v1.Interface())
			knownLayouts(v1)
			sent, err := json.Marshal(v1.Interface())
			require.NoError(t, err)
			read := reflect.New(cmdType)
			require.NoError(t, json.Unmarshal(sent, read.Interface()))
			again, err := json.Marshal(read.Elem().Interface())
			require.NoError(t, err)
			require.Equal(t, string(sent), string(again), "log → command → log")
		})
	}
}

// TestStateConvertsLosslessly does the same for the whole state and its
// snapshot form.
func TestStateConvertsLosslessly(t *testing.T) {
	st := filltest.New[*state](filler())
	knownLayouts(reflect.ValueOf(st))
	for _, r := range st.Clusters {
		r.Upgrade.BuildIndex() // as every decoded upgrade has them
	}
	snap, err := encodeSnapshot(st, 1)
	require.NoError(t, err)
	back, version, err := decodeSnapshot(snap)
	require.NoError(t, err)
	require.Equal(t, snapshotVersion, version)
	require.Equal(t, st, back, "state → snapshot → state")

	v1 := filltest.New[stateV1](filler())
	knownLayouts(reflect.ValueOf(&v1))
	var d v1Decoder
	read := d.state(v1)
	require.NoError(t, d.err)
	require.Equal(t, v1, stateToV1(read), "snapshot → state → snapshot")
}

func TestBadVersionsAreRefused(t *testing.T) {
	_, _, err := decodeSnapshot([]byte(`{"clusters":{"lab":{"spec":{"name":"lab"},"statusVersion":"2.0.0"}}}`))
	require.ErrorIs(t, err, raftstore.ErrBadSnapshot)
	require.ErrorIs(t, err, phases.ErrInvalidVersion)

	var c StartUpgradeCmd
	require.ErrorIs(t, json.Unmarshal([]byte(`{"cluster":"lab","to":"banana"}`), &c), phases.ErrInvalidVersion)
	require.Panics(t, func() {
		_, _ = New().Handlers()[CmdStartUpgrade](1, []byte(`{"cluster":"lab","to":"banana"}`))
	}, "replicas that cannot read an entry have diverged")
}

// TestRestoredUpgradesHaveTheirIndexes: an upgrade read from a snapshot
// has its lookup indexes built, so Decide, which the leader runs on a copy
// taken under the read lock, never builds (writes) them.
func TestRestoredUpgradesHaveTheirIndexes(t *testing.T) {
	golden, err := os.ReadFile(goldenSnapshotPath)
	require.NoError(t, err)
	f := New()
	require.NoError(t, f.Restore(golden))
	n := 0
	for _, r := range f.st.Clusters {
		if u := r.Upgrade; u != nil {
			indexed := *u
			indexed.BuildIndex()
			require.Equal(t, &indexed, u, "upgrade %s", u.ID)
			n++
		}
	}
	require.NotZero(t, n)
}

// TestPersistedV1Encoding encodes the persisted form of the state and of
// every command, filled and empty (to pin omitempty and omitzero), and
// compares with testdata/persisted-v1/. The V1 types are append-only, so
// the encoding may only grow: -update rewrites a file only when nothing
// but additions changed.
func TestPersistedV1Encoding(t *testing.T) {
	forms := map[string]any{"state": stateV1{}}
	cmds := commandsByType(t)
	for _, pc := range pinnedCommands {
		forms[pc.name] = cmds[pc.typ].persistedV1()
	}
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			filled := reflect.New(reflect.TypeOf(form))
			filler().Fill(filled.Interface())
			got, err := json.MarshalIndent(map[string]any{"filled": filled.Interface(), "zero": reflect.Zero(reflect.TypeOf(form)).Interface()}, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			path := filepath.Join("testdata", "persisted-v1", name+".json")
			want, err := os.ReadFile(path)
			if *update && os.IsNotExist(err) {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				want, err = got, os.WriteFile(path, got, 0o644)
			}
			require.NoError(t, err)
			require.NoError(t, filltest.Grown(want, got), "the persisted form of %s changed, not only grew: old logs would no longer read", name)
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			require.Equal(t, string(want), string(got), "the persisted form of %s grew: run with -update", name)
		})
	}
}
