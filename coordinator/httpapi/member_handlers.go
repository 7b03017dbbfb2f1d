package httpapi

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
)

// MemberService is the coordinator's Raft membership: what the member
// handlers need.
type MemberService interface {
	Members() ([]api.Member, error)
	Join(ctx context.Context, r api.JoinRequest) error
	// MemberCertificate signs a member's certificate before it joins.
	MemberCertificate(ctx context.Context, r api.JoinRequest) (api.JoinResponse, error)
	RemoveMember(ctx context.Context, id string) error
	// MemberSelf is this member's own answer: what it runs and reads.
	MemberSelf() api.MemberSelf
}

// memberHandlers serve /v1/members.
type memberHandlers struct{ svc MemberService }

func (h *memberHandlers) members(w http.ResponseWriter, r *http.Request) {
	ms, err := h.svc.Members()
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, ms)
}

func (h *memberHandlers) join(w http.ResponseWriter, r *http.Request) {
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

func (h *memberHandlers) removeMember(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.RemoveMember(r.Context(), chi.URLParam(r, "id")); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// memberCertificate signs the certificate a member needs before it joins
// (admin): it serves and dials Raft with it.
func (h *memberHandlers) memberCertificate(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	resp, err := h.svc.MemberCertificate(r.Context(), req)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, resp)
}
