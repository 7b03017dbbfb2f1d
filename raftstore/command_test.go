package raftstore

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/moltproject/molt/raftstore/command"
)

func TestEncodeDecode(t *testing.T) {
	tests := []struct {
		name     string
		cmd      Command
		wantType CommandType
		wantErr  error
		wantJSON string
	}{
		{name: "struct", cmd: putBody{Key: "k", Value: "v"}, wantType: cmdPut, wantJSON: `{"key":"k","value":"v"}`},
		{name: "raw json", cmd: rawCmd{cmdDel, json.RawMessage(`{"key":"x"}`)}, wantType: cmdDel, wantJSON: `{"key":"x"}`},
		{name: "nil body", cmd: rawCmd{cmdPut, nil}, wantType: cmdPut, wantJSON: `null`},
		{name: "flagged type", cmd: noteBody{}, wantType: cmdNote, wantJSON: `{}`},
		{name: "internal type", cmd: setMemberBody{ID: "a"}, wantType: cmdSetMember, wantJSON: `{"id":"a","raft_addr":"","http_addr":""}`},
		{name: "type zero refused", cmd: rawCmd{0, 1}, wantErr: ErrBadCommand},
		{name: "flag alone refused", cmd: rawCmd{IgnoreUnknown, 1}, wantErr: ErrBadCommand},
		{name: "unmarshalable body", cmd: rawCmd{cmdPut, math.Inf(1)}, wantErr: ErrBadCommand},
		{name: "nil command refused", cmd: nil, wantErr: ErrBadCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Encode(tt.cmd)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, byte(tt.wantType), b[0], "the first byte is the type")
			typ, body, err := Decode(b)
			require.NoError(t, err)
			require.Equal(t, tt.wantType, typ)
			require.JSONEq(t, tt.wantJSON, string(body))
		})
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"nil":       nil,
		"empty":     {},
		"type zero": {0, '{', '}'},
		"flag only": {byte(IgnoreUnknown)},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Decode(b)
			require.ErrorIs(t, err, ErrBadCommand)
		})
	}
}

// Property: any valid type and body survive Encode → Decode unchanged.
func TestEncodeDecodeRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		typ := CommandType(rapid.Uint8Range(1, 255).Filter(func(v uint8) bool { return v != uint8(IgnoreUnknown) }).Draw(t, "type"))
		in := putBody{
			Key:   rapid.String().Draw(t, "key"),
			Value: rapid.String().Draw(t, "value"),
		}
		if rapid.Bool().Draw(t, "hasExpected") {
			in.ExpectedVersion = ptr(rapid.Uint64().Draw(t, "expected"))
		}
		b, err := Encode(rawCmd{typ, in})
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		gotType, body, err := Decode(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if gotType != typ {
			t.Fatalf("type %s, want %s", gotType, typ)
		}
		var out putBody
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		require.Equal(t, in, out)
	})
}

// Property: Decode never panics, and whatever it accepts re-frames to the
// same bytes.
func TestDecodeArbitraryBytesProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOf(rapid.Byte()).Draw(t, "bytes")
		typ, body, err := Decode(b)
		if err != nil {
			return
		}
		if got := append([]byte{byte(typ)}, body...); string(got) != string(b) {
			t.Fatalf("re-framed %x, want %x", got, b)
		}
	})
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{byte(cmdPut), '{', '}'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, body, err := Decode(b)
		if err != nil {
			return
		}
		re, err := Encode(rawCmd{typ, json.RawMessage(body)})
		if err != nil {
			return // body was not valid JSON: Encode refuses, Decode need not
		}
		typ2, _, err := Decode(re)
		require.NoError(t, err)
		require.Equal(t, typ, typ2)
	})
}

func TestCommandTypeString(t *testing.T) {
	require.Equal(t, "16", cmdPut.String())
	require.Equal(t, "26|ignore-unknown", cmdNote.String())
}

func TestDecodeBodyIsStrict(t *testing.T) {
	var b putBody
	require.NoError(t, command.DecodeBody([]byte(` {"key":"k","value":"v","expected_version":2} `), &b))
	require.Equal(t, putBody{Key: "k", Value: "v", ExpectedVersion: ptr[uint64](2)}, b)

	err := command.DecodeBody([]byte(`{"key":"k","ttl":5}`), &putBody{})
	require.ErrorIs(t, err, ErrUnknownField)
	require.EqualError(t, err, `raftstore: unknown field "ttl"`)

	var m map[string]memberMeta
	err = command.DecodeBody([]byte(`{"n0":{"raft_addr":"a","zone":"b"}}`), &m)
	require.ErrorIs(t, err, ErrUnknownField, "nested values are strict too")

	err = command.DecodeBody([]byte(`{"key":"k"}{}`), &putBody{})
	require.Error(t, err, "nothing may follow the value")
	require.NotErrorIs(t, err, ErrUnknownField)

	err = command.DecodeBody([]byte(`{"key":1}`), &putBody{})
	require.Error(t, err)
	require.NotErrorIs(t, err, ErrUnknownField)
}
