package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
)

// CredentialService issues and revokes credentials (trust.go in package
// coordinator): what the token and enrollment handlers need. Checking a
// credential is the Authenticator's (auth.go).
type CredentialService interface {
	CreateToken(ctx context.Context, req api.TokenRequest, by string) (api.Token, error)
	Tokens() []api.Token
	DeleteToken(ctx context.Context, id string) error
	Enroll(ctx context.Context, bearer string, req api.EnrollRequest) (api.EnrollResponse, error)
	RenewAgentCert(ctx context.Context, cluster, node, oldSerial string, req api.RenewRequest) (api.EnrollResponse, error)
}

// credentialHandlers serve /v1/tokens, an agent's enrollment and its
// certificate's renewal.
type credentialHandlers struct{ svc CredentialService }

func (h *credentialHandlers) tokens(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, h.svc.Tokens())
}

func (h *credentialHandlers) createToken(w http.ResponseWriter, r *http.Request) {
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

func (h *credentialHandlers) deleteToken(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.DeleteToken(r.Context(), chi.URLParam(r, "id")); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// enroll is the one route a caller without a certificate or API token may
// use to change state, with a bootstrap token the coordinator checks
// (checkBootstrap first, then the enrollment itself).
func (h *credentialHandlers) enroll(w http.ResponseWriter, r *http.Request) {
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
func (h *credentialHandlers) renew(w http.ResponseWriter, r *http.Request) {
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
