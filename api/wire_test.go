package api_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/filltest"
)

var update = flag.Bool("update", false, "write the golden files of new wire types under testdata/wire/")

// wireTypes are the resources whose JSON testdata/wire/ pins. Their shapes
// were the engine's JSON until the API got types of its own; the golden
// files were written when the two encoded alike, and keep the API's JSON
// from moving now that nothing ties it to the engine.
var wireTypes = map[string]func() any{
	"cluster":       func() any { return new(api.Cluster) },
	"cluster-spec":  func() any { return new(api.ClusterSpec) },
	"upgrade":       func() any { return new(api.Upgrade) },
	"plan":          func() any { return new(api.Plan) },
	"preflight-run": func() any { return new(api.PreflightRun) },
}

// TestWireJSON encodes each wire type twice, with every field filled and
// empty (to pin omitempty and omitzero too), and compares with its golden
// file. A diff here is a change of the API: clients read these bytes.
// -update writes the files of types that have none yet, never others.
func TestWireJSON(t *testing.T) {
	for name, mk := range wireTypes {
		t.Run(name, func(t *testing.T) {
			filled := mk()
			(&filltest.Filler{Fields: versions}).Fill(filled)
			got, err := json.MarshalIndent(map[string]any{"filled": filled, "zero": mk()}, "", "  ")
			require.NoError(t, err)
			path := filepath.Join("testdata", "wire", name+".json")
			if _, err := os.Stat(path); *update && os.IsNotExist(err) {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, append(got, '\n'), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "a new wire type: run with -update to write its golden file")
			require.Equal(t, string(want), string(got)+"\n", "the JSON of api.%s moved", name)
		})
	}
}

// versions fills the fields that hold a version with one, as the API does.
func versions(name string, n int) (string, bool) {
	switch name {
	case "Version", "From", "To", "Target":
		return fmt.Sprintf("1.%d.%d", n, n), true
	}
	return "", false
}
