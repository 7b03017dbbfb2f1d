package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
)

func (h *handlers) members(w http.ResponseWriter, r *http.Request) {
	ms, err := h.svc.Members()
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, ms)
}

func (h *handlers) join(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.Join(r.Context(), req); err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, req)
}

func (h *handlers) removeMember(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.RemoveMember(r.Context(), chi.URLParam(r, "id")); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
