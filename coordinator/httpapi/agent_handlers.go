package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
)

// AgentService is the leader's side of an agent's calls: what the agent
// handlers need. (A follower's relay of heartbeats is HeartbeatRelay,
// relay.go.)
type AgentService interface {
	Register(ctx context.Context, r api.RegisterRequest) (api.RegisterResponse, error)
	Heartbeat(ctx context.Context, h api.AgentHealth) error
	// PollAgent is an agent's long poll: its operations and the
	// cluster's upgrade in progress.
	PollAgent(ctx context.Context, cluster, node string, wait time.Duration) (api.OperationsResponse, error)
	ReportResult(ctx context.Context, cluster, node string, r api.OperationResult) error
}

// agentHandlers serve /v1/agents: registration, heartbeats, long polls
// (at most maxPoll long, and maxPolls open per node on this member) and
// results.
type agentHandlers struct {
	svc      AgentService
	maxPoll  time.Duration
	maxPolls int

	pollMu sync.Mutex
	polls  map[string]int // open long polls by "cluster/node"
}

// enterPoll counts a long poll of node in, or refuses it beyond
// Config.MaxPollsPerNode; the caller calls the returned function when the
// poll ends.
func (h *agentHandlers) enterPoll(cluster, node string) (func(), error) {
	key := cluster + "/" + node
	h.pollMu.Lock()
	defer h.pollMu.Unlock()
	if h.polls[key] >= h.maxPolls {
		return nil, &coordinator.RuleError{Rule: "poll-concurrency",
			Detail: fmt.Sprintf("%s already has %d long poll(s) open; at most %d", key, h.polls[key], h.maxPolls), Err: errTooManyPolls}
	}
	h.polls[key]++
	return func() {
		h.pollMu.Lock()
		defer h.pollMu.Unlock()
		if h.polls[key]--; h.polls[key] <= 0 {
			delete(h.polls, key)
		}
	}, nil
}

func (h *agentHandlers) register(w http.ResponseWriter, r *http.Request) {
	var req api.RegisterRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := checkAgentBody(r, req.Cluster, req.Node); err != nil {
		writeProblem(w, r, err)
		return
	}
	resp, err := h.svc.Register(r.Context(), req)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, resp)
}

func (h *agentHandlers) heartbeat(w http.ResponseWriter, r *http.Request) {
	hb, err := beatOf(w, r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.Heartbeat(r.Context(), hb); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// beatOf reads an agent's heartbeat: its body must name the caller's own
// node, the one the path names.
func beatOf(w http.ResponseWriter, r *http.Request) (api.AgentHealth, error) {
	var hb api.AgentHealth
	if err := decode(w, r, &hb); err != nil {
		return hb, err
	}
	if err := checkAgentBody(r, hb.Cluster, hb.Node); err != nil {
		return hb, err
	}
	if hb.Cluster != chi.URLParam(r, "cluster") || hb.Node != chi.URLParam(r, "node") {
		return hb, &coordinator.RuleError{Rule: "agent-identity", Detail: "heartbeat body names another node than the path", Err: coordinator.ErrInvalid}
	}
	return hb, nil
}

func (h *agentHandlers) poll(w http.ResponseWriter, r *http.Request) {
	wait := time.Duration(0)
	if s := r.URL.Query().Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			writeProblem(w, r, &coordinator.RuleError{Rule: "wait", Detail: fmt.Sprintf("wait=%q is not a duration", s), Err: coordinator.ErrInvalid})
			return
		}
		wait = min(d, h.maxPoll)
	}
	cluster, node := chi.URLParam(r, "cluster"), chi.URLParam(r, "node")
	leave, err := h.enterPoll(cluster, node)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	defer leave()
	resp, err := h.svc.PollAgent(r.Context(), cluster, node, wait)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	if resp.Operations == nil {
		resp.Operations = []api.Operation{}
	}
	writeJSON(w, 200, resp)
}

func (h *agentHandlers) result(w http.ResponseWriter, r *http.Request) {
	var res api.OperationResult
	if err := decode(w, r, &res); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.ReportResult(r.Context(), chi.URLParam(r, "cluster"), chi.URLParam(r, "node"), res); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
