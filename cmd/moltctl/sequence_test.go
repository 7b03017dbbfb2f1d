package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// sampleSequence is a three-stage sequence as GET
// /v1/rollout-sequences/{name} answers it: 1.34.4 held in staging by a
// failure, 1.33.7 through every stage, 1.34.5 soaking in dev.
func sampleSequence() api.RolloutSequence {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	return api.RolloutSequence{Name: "fleet", UpdatedAt: t0,
		Stages: []api.SequenceStage{
			{Name: "dev", Clusters: []string{"dev-1", "dev-2"}, Soak: "86400s"},
			{Name: "staging", Selector: map[string]string{"tier": "staging"}, Soak: "259200s"},
			{Name: "prod", Clusters: []string{"prod-eu"}, Selector: map[string]string{"tier": "prod"}},
		},
		Overrides: []api.SequenceOverride{{Version: "1.33.7", Stage: "staging", Action: api.SequenceResume, Reason: "flaky node, INC-42", At: t0.Add(-48 * time.Hour)}},
		Versions: []api.SequenceVersion{
			{Version: "1.34.5", Reached: 0, Stage: "dev", Stages: []api.SequenceStageRun{
				{Name: "dev", Clusters: []string{"dev-1", "dev-2"}, ReachedAt: t0, SoakEnds: t0.Add(24 * time.Hour), Open: true},
				{Name: "staging", Clusters: []string{"stg-1", "stg-2"}, NotReached: []string{"stg-1", "stg-2"}},
				{Name: "prod", Clusters: []string{"prod-eu", "prod-us"}, NotReached: []string{"prod-eu", "prod-us"}},
			}},
			{Version: "1.34.4", Reached: 1, Stage: "staging", Stages: []api.SequenceStageRun{
				{Name: "dev", Clusters: []string{"dev-1", "dev-2"}, ReachedAt: t0.Add(-96 * time.Hour), SoakEnds: t0.Add(-72 * time.Hour), Open: true, Done: true},
				{Name: "staging", Clusters: []string{"stg-1", "stg-2"}, NotReached: []string{"stg-2"}, Open: true, Held: true, Failed: []string{"stg-2"}},
				{Name: "prod", Clusters: []string{"prod-eu", "prod-us"}, NotReached: []string{"prod-eu", "prod-us"}},
			}},
			{Version: "1.33.7", Reached: 3, Stages: []api.SequenceStageRun{
				{Name: "dev", Clusters: []string{"dev-1", "dev-2"}, Open: true, Done: true},
				{Name: "staging", Clusters: []string{"stg-1", "stg-2"}, Open: true, Done: true, Skipped: true},
				{Name: "prod", Clusters: []string{"prod-eu", "prod-us"}, ReachedAt: t0.Add(-time.Hour), SoakEnds: t0.Add(-time.Hour), Open: true, Done: true},
			}},
		}}
}

// sequenceServer is a fake coordinator's /v1/rollout-sequences/fleet:
// it answers sampleSequence and keeps each request's method, path and
// body.
type sequenceServer struct {
	reqs []string
}

func (s *sequenceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.reqs = append(s.reqs, r.Method+" "+r.URL.Path+" "+string(bytes.TrimSpace(b)))
	if r.Method == http.MethodDelete {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/v1/rollout-sequences/fleet/plan" {
		t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
		_ = json.NewEncoder(w).Encode(api.SequencePlan{Sequence: "fleet", Version: r.URL.Query().Get("version"), Finish: t0.Add(100 * time.Hour),
			Stages: []api.PlannedStage{{Name: "dev", Opens: t0, Done: t0.Add(2 * time.Hour), SoakEnds: t0.Add(26 * time.Hour)}, {Name: "prod", Opens: t0.Add(26 * time.Hour), Done: t0.Add(100 * time.Hour)}},
			Clusters: []api.PlannedSeqCluster{{Cluster: "dev-1", Stage: "dev", From: "1.34.3", Start: t0.Add(-time.Hour), Finish: t0.Add(-time.Hour), Already: true},
				{Cluster: "dev-2", Stage: "dev", From: "1.34.3", Start: t0, Finish: t0.Add(2 * time.Hour)},
				{Cluster: "prod-eu", Stage: "prod", From: "1.34.3", Start: t0.Add(98 * time.Hour), Finish: t0.Add(100 * time.Hour), OutlastsWindow: true}}})
		return
	}
	if r.URL.Path == "/v1/rollout-sequences" {
		_ = json.NewEncoder(w).Encode([]api.RolloutSequence{sampleSequence()})
		return
	}
	_ = json.NewEncoder(w).Encode(sampleSequence())
}

func runSequence(t *testing.T, s *sequenceServer, args ...string) string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	var out bytes.Buffer
	root := (&cli{out: &out}).root()
	root.SetArgs(append([]string{"--server", srv.URL, "sequence"}, args...))
	require.NoError(t, root.Execute())
	return out.String()
}

// TestSequenceStatusGolden pins the table of `moltctl sequence status`:
// per version in play, each stage's state, clusters at the version, soak
// end and the clusters not at it, and what to do about a hold; and the
// stages of `moltctl sequence get`.
func TestSequenceStatusGolden(t *testing.T) {
	for _, c := range []struct {
		golden string
		args   []string
	}{{"sequence-status.golden", []string{"status", "fleet"}}, {"sequence-get.golden", []string{"get", "fleet"}}, {"sequence-plan.golden", []string{"plan", "fleet", "--version", "1.34.4"}}} {
		out := runSequence(t, &sequenceServer{}, c.args...)
		golden := filepath.Join("testdata", c.golden)
		if *update {
			require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
		}
		want, err := os.ReadFile(golden)
		require.NoError(t, err, "run with -update to create it")
		require.Equal(t, string(want), out)
	}
}

// TestSequenceCommandsSendTheWire: put sends the file's stages, resume
// and skip the version and reason to their routes, delete and list theirs.
func TestSequenceCommandsSendTheWire(t *testing.T) {
	file := filepath.Join(t.TempDir(), "fleet.yaml")
	require.NoError(t, os.WriteFile(file, []byte("stages:\n- name: dev\n  clusters: [dev-1]\n  soak: 24h\n- name: prod\n  selector: {tier: prod}\n"), 0o644))
	s := &sequenceServer{}
	require.Equal(t, "rollout sequence fleet stored: dev → staging → prod\n", runSequence(t, s, "put", "fleet", "-f", file))
	require.Equal(t, "rollout sequence fleet: stage staging resumed for 1.34.4\n",
		runSequence(t, s, "resume", "fleet", "staging", "--version", "1.34.4", "--reason", "stg-2 was a bad disk"))
	runSequence(t, s, "skip", "fleet", "staging", "--version", "1.34.4")
	require.Contains(t, runSequence(t, s, "list"), "fleet                dev → staging → prod")
	require.Equal(t, "rollout sequence fleet deleted\n", runSequence(t, s, "delete", "fleet"))
	require.Equal(t, []string{
		`PUT /v1/rollout-sequences/fleet {"stages":[{"name":"dev","clusters":["dev-1"],"soak":"24h"},{"name":"prod","selector":{"tier":"prod"}}]}`,
		`POST /v1/rollout-sequences/fleet/stages/staging/resume {"version":"1.34.4","reason":"stg-2 was a bad disk"}`,
		`POST /v1/rollout-sequences/fleet/stages/staging/skip {"version":"1.34.4"}`,
		`GET /v1/rollout-sequences `,
		`DELETE /v1/rollout-sequences/fleet `,
	}, s.reqs)
}
