package raftstore

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestEncodeDecode(t *testing.T) {
	tests := []struct {
		name     string
		typ      CommandType
		body     any
		wantErr  error
		wantJSON string
	}{
		{name: "struct", typ: cmdPut, body: putBody{Key: "k", Value: "v"}, wantJSON: `{"key":"k","value":"v"}`},
		{name: "raw json", typ: cmdDel, body: json.RawMessage(`{"key":"x"}`), wantJSON: `{"key":"x"}`},
		{name: "nil body", typ: cmdPut, body: nil, wantJSON: `null`},
		{name: "flagged type", typ: cmdNote, body: 1, wantJSON: `1`},
		{name: "internal type", typ: cmdSetMember, body: setMemberBody{ID: "a"}, wantJSON: `{"id":"a","raft_addr":"","http_addr":""}`},
		{name: "type zero refused", typ: 0, body: 1, wantErr: ErrBadCommand},
		{name: "flag alone refused", typ: IgnoreUnknown, body: 1, wantErr: ErrBadCommand},
		{name: "unmarshalable body", typ: cmdPut, body: math.Inf(1), wantErr: ErrBadCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Encode(tt.typ, tt.body)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, byte(tt.typ), b[0], "the first byte is the type")
			typ, body, err := Decode(b)
			require.NoError(t, err)
			require.Equal(t, tt.typ, typ)
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
		b, err := Encode(typ, in)
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
		re, err := Encode(typ, json.RawMessage(body))
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
