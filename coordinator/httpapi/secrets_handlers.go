package httpapi

import (
	"context"
	"net/http"

	"github.com/moltproject/molt/api"
)

// SecretService rewraps the stored secrets (secrets.go in package
// coordinator): what the secrets handler needs.
type SecretService interface {
	// RewrapSecrets seals every stored secret again with the primary
	// encryption key.
	RewrapSecrets(ctx context.Context) (api.RewrapResult, error)
}

// secretHandlers serve /v1/secrets.
type secretHandlers struct{ svc SecretService }

// rewrapSecrets seals every stored secret again with the leader's primary
// encryption key: the step of a key rotation that follows the new key's
// arrival in every member's key file (docs/security.md). No body, or {}.
func (h *secretHandlers) rewrapSecrets(w http.ResponseWriter, r *http.Request) {
	if err := decodeNone(w, r); err != nil {
		writeProblem(w, r, err)
		return
	}
	res, err := h.svc.RewrapSecrets(r.Context())
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
