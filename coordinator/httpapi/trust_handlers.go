package httpapi

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
)

func (h *handlers) tokens(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, h.svc.Tokens())
}

func (h *handlers) createToken(w http.ResponseWriter, r *http.Request) {
	var req api.TokenRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	t, err := h.svc.CreateToken(r.Context(), req, PrincipalFrom(r.Context()).Name)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

func (h *handlers) deleteToken(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.DeleteToken(r.Context(), chi.URLParam(r, "id")); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// enroll is the one route a caller without a certificate or API token may
// use to change state, with a bootstrap token the coordinator checks
// (checkBootstrap first, then the enrollment itself).
func (h *handlers) enroll(w http.ResponseWriter, r *http.Request) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		writeProblem(w, r, &coordinator.RuleError{Rule: "authentication-required", Detail: "enrollment needs a bootstrap token: Authorization: Bearer <token>", Err: coordinator.ErrUnauthorized})
		return
	}
	var req api.EnrollRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	resp, err := h.svc.Enroll(r.Context(), tok, req)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, resp)
}

// renew signs a new certificate for the agent presenting a current one.
func (h *handlers) renew(w http.ResponseWriter, r *http.Request) {
	var req api.RenewRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	serial := PrincipalFrom(r.Context()).Serial
	resp, err := h.svc.RenewAgentCert(r.Context(), chi.URLParam(r, "cluster"), chi.URLParam(r, "node"), serial, req)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, resp)
}

// memberCertificate signs the certificate a member needs before it joins
// (admin): it serves and dials Raft with it.
func (h *handlers) memberCertificate(w http.ResponseWriter, r *http.Request) {
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
