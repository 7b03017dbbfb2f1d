package httpapi

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
)

// PreflightService starts and reads preflight runs: what the preflight
// handlers need. It speaks the coordinator's stored runs, which wire.go
// renders.
type PreflightService interface {
	StartPreflight(ctx context.Context, cluster, version string) (string, error)
	Preflight(cluster, id string) (coordinator.PreflightRun, error)
	// Preflights lists a cluster's stored runs, newest first, without
	// their operations and results.
	Preflights(cluster string) ([]coordinator.PreflightSummary, error)
}

// preflightHandlers serve a cluster's preflight runs.
type preflightHandlers struct{ svc PreflightService }

func (h *preflightHandlers) startPreflight(w http.ResponseWriter, r *http.Request) {
	var req api.PreflightRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	name := chi.URLParam(r, "name")
	id, err := h.svc.StartPreflight(r.Context(), name, req.Version)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	run, err := h.svc.Preflight(name, id)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, preflightRunToAPI(run))
}

func (h *preflightHandlers) preflights(w http.ResponseWriter, r *http.Request) {
	runs, err := h.svc.Preflights(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	out := make([]api.PreflightRunSummary, len(runs))
	for i, run := range runs {
		out[i] = preflightSummaryToAPI(run)
	}
	writeJSON(w, 200, out)
}

func (h *preflightHandlers) preflight(w http.ResponseWriter, r *http.Request) {
	run, err := h.svc.Preflight(chi.URLParam(r, "name"), chi.URLParam(r, "id"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, preflightRunToAPI(run))
}
