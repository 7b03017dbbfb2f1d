package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/moltproject/molt/api"
)

// Canned answers of the coordinator: api.PreflightRun on the wire.
const (
	runningRun = `{"id":"c1-1","cluster":"c1","target":"1.34.4","state":"running",
		"createdAt":"2025-06-01T10:00:00Z","deadline":"2025-06-01T10:02:00Z",
		"operations":{"w-1":[{"id":"preflight-c1-1-w-1-artifacts","kind":"CheckArtifacts"}]}}`
	failedRun = `{"id":"c1-1","cluster":"c1","target":"1.34.4","state":"done",
		"createdAt":"2025-06-01T10:00:00Z","deadline":"2025-06-01T10:02:00Z","finishedAt":"2025-06-01T10:00:12Z",
		"operations":{"w-1":[{"id":"preflight-c1-1-w-1-artifacts","kind":"CheckArtifacts"}]},
		"results":{"preflight-c1-1-w-1-artifacts":{"id":"preflight-c1-1-w-1-artifacts","kind":"CheckArtifacts","state":"succeeded"}},
		"report":{"verdict":"failed","failed":["nodes-ready"],"results":[
			{"check":"agents-reporting","severity":"blocking","status":"pass","message":"2 agents reporting","blocks":false},
			{"check":"nodes-ready","severity":"blocking","status":"fail","message":"1 node not Ready: w-2 (NotReady)","data":{"w-2":"NotReady"},"blocks":true},
			{"check":"pdbs-blocking-drain","severity":"warning","status":"warn","message":"1 PodDisruptionBudget allows no disruption now: db/pg","data":{"db/pg":"nodes w-1,w-2"},"blocks":false}]}}`
	passedRun = `{"id":"c1-1","cluster":"c1","target":"1.34.4","state":"done",
		"createdAt":"2025-06-01T10:00:00Z","deadline":"2025-06-01T10:02:00Z","finishedAt":"2025-06-01T10:00:05Z",
		"operations":{},
		"report":{"verdict":"passedWithWarnings","results":[
			{"check":"nodes-ready","severity":"blocking","status":"pass","message":"3 nodes Ready","blocks":false},
			{"check":"protected-pods","severity":"warning","status":"fail","message":"pods could not be listed","data":{"pods":"forbidden"},"blocks":false}]}}`
)

// fakeCoordinator serves a cluster whose spec asks for 1.34.4 and one
// preflight run that is running for the first pollsRunning reads, then
// finishes as done.
type fakeCoordinator struct {
	mu           sync.Mutex
	done         string
	pollsRunning int
	started      []api.PreflightRequest
	gets         int
}

func (f *fakeCoordinator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/clusters/c1":
		_, _ = io.WriteString(w, `{"spec":{"name":"c1","kind":"user","version":"1.34.4"},"status":{"version":"1.34.3"}}`)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/clusters/c1/preflight":
		var req api.PreflightRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.started = append(f.started, req)
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, runningRun)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/clusters/c1/preflight/c1-1":
		f.gets++
		if f.gets <= f.pollsRunning {
			_, _ = io.WriteString(w, runningRun)
			return
		}
		_, _ = io.WriteString(w, f.done)
	default:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"type":"https://molt.dev/problems/not-found","title":"Not found","status":404}`)
	}
}

// moltctl runs the CLI against srv and returns its stdout and error.
func moltctl(t *testing.T, srv *httptest.Server, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli{out: &out, poll: time.Millisecond}
	root := c.root()
	root.SetArgs(append([]string{"--server", srv.URL}, args...))
	root.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	t.Log(errOut.String())
	return out.String(), err
}

func TestPreflightRunWaitsAndFailsOnBlockingChecks(t *testing.T) {
	f := &fakeCoordinator{done: failedRun, pollsRunning: 2}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)

	out, err := moltctl(t, srv, "preflight", "run", "c1")
	require.ErrorContains(t, err, "preflight c1-1 failed: blocking check(s) nodes-ready")
	require.Equal(t, []api.PreflightRequest{{Version: "1.34.4"}}, f.started, "the target defaults to the cluster's spec.version")
	require.Equal(t, 3, f.gets, "polled until done")

	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Equal(t, "preflight c1-1 of c1, target 1.34.4: failed in 12s", lines[0])
	require.Equal(t, []string{"CHECK", "SCOPE", "RESULT", "MESSAGE"}, strings.Fields(lines[1]))
	rows := map[string][]string{}
	for _, l := range lines[2 : len(lines)-1] {
		f := strings.Fields(l)
		rows[f[0]+" "+f[1]] = f[2:]
	}
	require.Equal(t, map[string][]string{
		"agents-reporting cluster":    {"pass", "2", "agents", "reporting"},
		"nodes-ready cluster":         {"FAIL", "1", "node", "not", "Ready:", "w-2", "(NotReady)"},
		"nodes-ready w-2":             {"FAIL", "NotReady"},
		"pdbs-blocking-drain cluster": {"warn", "1", "PodDisruptionBudget", "allows", "no", "disruption", "now:", "db/pg"},
		"pdbs-blocking-drain db/pg":   {"warn", "nodes", "w-1,w-2"},
	}, rows)
	require.Equal(t, "blocking: nodes-ready", lines[len(lines)-1])
}

func TestPreflightRunPasses(t *testing.T) {
	f := &fakeCoordinator{done: passedRun}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)

	out, err := moltctl(t, srv, "preflight", "run", "c1", "--target", "1.34.5", "-o", "json")
	require.NoError(t, err, "a failed warning check does not block")
	require.Equal(t, []api.PreflightRequest{{Version: "1.34.5"}}, f.started)
	var r api.PreflightRun
	require.NoError(t, json.Unmarshal([]byte(out), &r), "only the finished run is printed: %s", out)
	require.Equal(t, api.PreflightDone, r.State)
	require.Equal(t, "passedWithWarnings", r.Report.Verdict)
}

func TestPreflightRunNoWait(t *testing.T) {
	f := &fakeCoordinator{done: failedRun}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)

	out, err := moltctl(t, srv, "preflight", "run", "c1", "--target", "1.34.4", "--wait=false")
	require.NoError(t, err)
	require.Equal(t, "preflight c1-1 of c1 started (target 1.34.4); see: moltctl preflight get c1 c1-1\n", out)
	require.Zero(t, f.gets)
}

func TestPreflightGet(t *testing.T) {
	f := &fakeCoordinator{done: failedRun, pollsRunning: 1}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)

	out, err := moltctl(t, srv, "preflight", "get", "c1", "c1-1")
	require.NoError(t, err)
	require.Equal(t, "preflight c1-1 of c1, target 1.34.4: running, 0 of 1 host check(s) answered, deadline 2025-06-01T10:02:00Z\n", out)

	out, err = moltctl(t, srv, "preflight", "get", "c1", "c1-1", "-o", "yaml")
	require.NoError(t, err, "get shows a failed run without failing itself")
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &doc))
	require.Equal(t, "failed", doc["report"].(map[string]any)["verdict"])

	_, err = moltctl(t, srv, "preflight", "get", "c1", "nope")
	require.True(t, api.IsProblem(err, api.ProblemNotFound), "%v", err)
}
