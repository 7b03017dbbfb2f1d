package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
)

func (h *handlers) startPreflight(w http.ResponseWriter, r *http.Request) {
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

func (h *handlers) preflights(w http.ResponseWriter, r *http.Request) {
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

func (h *handlers) preflight(w http.ResponseWriter, r *http.Request) {
	run, err := h.svc.Preflight(chi.URLParam(r, "name"), chi.URLParam(r, "id"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, preflightRunToAPI(run))
}
