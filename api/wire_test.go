package api_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/filltest"
)

var update = flag.Bool("update", false, "rewrite testdata/wire/ where the wire only grew")

// wireTypes are the resources whose JSON testdata/wire/ pins. Their shapes
// were the engine's JSON until the API got types of its own; the golden
// files were first written when the two encoded alike, and keep the API's
// JSON from moving now that nothing ties it to the engine.
var wireTypes = map[string]func() any{
	"cluster":       func() any { return new(api.Cluster) },
	"cluster-spec":  func() any { return new(api.ClusterSpec) },
	"upgrade":       func() any { return new(api.Upgrade) },
	"plan":          func() any { return new(api.Plan) },
	"preflight-run": func() any { return new(api.PreflightRun) },
	"audit-page":    func() any { return new(api.AuditPage) },
	// The web view's reads.
	"session":              func() any { return new(api.Session) },
	"preflight-summaries":  func() any { return new([]api.PreflightRunSummary) },
	"maintenance-calendar": func() any { return new(api.MaintenanceCalendar) },
	// The policy GET and PUT .../maintenance-policy carry: the engine's
	// maintenance.Policy until it got this twin, whose JSON is the same
	// (api/convert's TestMaintenancePolicyIsThePolicyEndpoints).
	"maintenance-policy": func() any { return new(api.MaintenancePolicy) },
	"channel":            func() any { return new(api.Channel) },
	// A release catalog entry (its molt-agent since 0.2.0).
	"release":        func() any { return new(api.Release) },
	"upgrade-status": func() any { return new(api.UpgradeStatus) },
	// etcd backups (0.2.0): what GET .../backups answers.
	"backup-list": func() any { return new(api.BackupList) },
	// Rollout sequences: what PUT carries, what the routes answer.
	"rollout-sequence-spec":     func() any { return new(api.RolloutSequenceSpec) },
	"rollout-sequence":          func() any { return new(api.RolloutSequence) },
	"sequence-override-request": func() any { return new(api.SequenceOverrideRequest) },
	// An agent's long poll.
	"operations-response": func() any { return new(api.OperationsResponse) },
	// Between members: the beats a follower relays to the leader.
	"relayed-beats":        func() any { return new(api.RelayedBeats) },
	"relayed-beats-answer": func() any { return new(api.RelayedBeatsAnswer) },
	// and the read index it asks for (docs/security.md).
	"read-index": func() any { return new(api.ReadIndex) },
}

// TestWireJSON encodes each wire type twice, with every field filled and
// empty (to pin omitempty and omitzero too), and compares with its golden
// file. Clients read these bytes, so the wire may only grow: a field may
// be added, none renamed, removed or retyped. -update rewrites a golden
// file only when its type's JSON grew and nothing else changed.
func TestWireJSON(t *testing.T) {
	for name, mk := range wireTypes {
		t.Run(name, func(t *testing.T) {
			filled := mk()
			// A problem's extra members hold any JSON value: a string here.
			anyValue := map[reflect.Type]func(int) any{reflect.TypeFor[any](): func(n int) any { return fmt.Sprintf("extra-%d", n) }}
			(&filltest.Filler{Fields: versions, Types: anyValue}).Fill(filled)
			got, err := json.MarshalIndent(map[string]any{"filled": filled, "zero": mk()}, "", "  ")
			require.NoError(t, err)
			got = append(got, '\n')
			path := filepath.Join("testdata", "wire", name+".json")
			want, err := os.ReadFile(path)
			if *update && os.IsNotExist(err) {
				want, err = got, os.WriteFile(path, got, 0o644)
			}
			require.NoError(t, err)
			require.NoError(t, filltest.Grown(want, got), "the JSON of api.%s changed, not only grew", name)
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			require.Equal(t, string(want), string(got), "the JSON of api.%s grew: run with -update", name)
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
