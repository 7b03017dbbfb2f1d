package filltest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/filltest"
)

func TestGrown(t *testing.T) {
	old := `{"a":1,"b":{"c":"x"},"d":[{"e":true}]}`
	for _, tc := range []struct {
		name, now, err string
	}{
		{"same", old, ""},
		{"a field added", `{"a":1,"b":{"c":"x","f":2},"d":[{"e":true}],"g":null}`, ""},
		{"a field gone", `{"a":1,"b":{},"d":[{"e":true}]}`, ".b.c: gone"},
		{"a field renamed", `{"a":1,"b":{"C":"x"},"d":[{"e":true}]}`, ".b.c: gone"},
		{"a value changed", `{"a":2,"b":{"c":"x"},"d":[{"e":true}]}`, ".a: was 1, is 2"},
		{"a type changed", `{"a":"1","b":{"c":"x"},"d":[{"e":true}]}`, `.a: was 1, is "1"`},
		{"an array shrunk", `{"a":1,"b":{"c":"x"},"d":[]}`, ".d: was an array of 1, is an array of 0"},
		{"an object flattened", `{"a":1,"b":"x","d":[{"e":true}]}`, `.b: was an object, is "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := filltest.Grown([]byte(old), []byte(tc.now))
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.err)
		})
	}
}
