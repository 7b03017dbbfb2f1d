// Package agenttest is a stand-in for the coordinator's four agent
// endpoints (register, heartbeat, long-poll for operations, results), for
// tests of the agent on its own (package agent) and under systemd (package
// systemd). The coordinator's own tests use the real one.
package agenttest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// Coordinator serves the agent endpoints. Operations stay pending until a
// final result arrives, as the real coordinator re-delivers them.
type Coordinator struct {
	*httptest.Server
	mu         sync.Mutex
	pending    []api.Operation
	results    []api.OperationResult // final results, in arrival order
	heartbeats []api.AgentHealth
	registered int
	wake       chan struct{}
	artifacts  map[string][]byte
}

// New starts a stand-in that admits agents presenting token (any token
// when empty); it stops when the test ends.
func New(t testing.TB, token string) *Coordinator {
	f := &Coordinator{wake: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/register", func(w http.ResponseWriter, r *http.Request) {
		var req api.RegisterRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if token != "" && req.Token != token {
			http.Error(w, `{"type":"https://molt.dev/problems/unauthorized","status":401}`, http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		f.registered++
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(api.RegisterResponse{Cluster: req.Cluster, Node: req.Node})
	})
	mux.HandleFunc("POST /v1/agents/{c}/{n}/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var h api.AgentHealth
		_ = json.NewDecoder(r.Body).Decode(&h)
		f.mu.Lock()
		f.heartbeats = append(f.heartbeats, h)
		f.mu.Unlock()
	})
	mux.HandleFunc("GET /v1/agents/{c}/{n}/operations", func(w http.ResponseWriter, r *http.Request) {
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
		deadline := time.After(wait)
		for {
			f.mu.Lock()
			ops := append([]api.Operation(nil), f.pending...)
			f.mu.Unlock()
			if len(ops) > 0 {
				_ = json.NewEncoder(w).Encode(api.OperationsResponse{Operations: ops})
				return
			}
			select {
			case <-f.wake:
			case <-deadline:
				_ = json.NewEncoder(w).Encode(api.OperationsResponse{})
				return
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST /v1/agents/{c}/{n}/results", func(w http.ResponseWriter, r *http.Request) {
		var res api.OperationResult
		_ = json.NewDecoder(r.Body).Decode(&res)
		if res.State == api.OpRunning {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.results = append(f.results, res)
		for i, op := range f.pending {
			if op.ID == res.ID {
				f.pending = append(f.pending[:i], f.pending[i+1:]...)
				break
			}
		}
	})
	mux.HandleFunc("GET /artifacts/{name...}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		b, ok := f.artifacts[r.PathValue("name")]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Logf("fake coordinator: no route for %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// ServeArtifact serves content at /artifacts/name, as a coordinator serves
// its artifact directory, and returns the path and sha256 a release uses.
func (f *Coordinator) ServeArtifact(name string, content []byte) (path, sum string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.artifacts == nil {
		f.artifacts = map[string][]byte{}
	}
	f.artifacts[name] = content
	h := sha256.Sum256(content)
	return "/artifacts/" + name, hex.EncodeToString(h[:])
}

// Enqueue offers operations to the agent.
func (f *Coordinator) Enqueue(ops ...api.Operation) {
	f.mu.Lock()
	f.pending = append(f.pending, ops...)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// ResultsFor returns the final results received for id.
func (f *Coordinator) ResultsFor(id string) []api.OperationResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.OperationResult
	for _, r := range f.results {
		if r.ID == id {
			out = append(out, r)
		}
	}
	return out
}

// WaitResult polls until a final result for id arrived and returns the
// latest one.
func (f *Coordinator) WaitResult(t testing.TB, id string, within time.Duration) api.OperationResult {
	t.Helper()
	var res api.OperationResult
	require.Eventually(t, func() bool {
		rs := f.ResultsFor(id)
		if len(rs) == 0 {
			return false
		}
		res = rs[len(rs)-1]
		return true
	}, within, 10*time.Millisecond, "no result for %s", id)
	return res
}

// Heartbeats returns the heartbeats received so far.
func (f *Coordinator) Heartbeats() []api.AgentHealth {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.AgentHealth(nil), f.heartbeats...)
}

// Registered counts registrations.
func (f *Coordinator) Registered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.registered
}
