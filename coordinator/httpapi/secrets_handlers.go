package httpapi

import "net/http"

// rewrapSecrets seals every stored secret again with the leader's primary
// encryption key: the step of a key rotation that follows the new key's
// arrival in every member's key file (docs/security.md). No body, or {}.
func (h *handlers) rewrapSecrets(w http.ResponseWriter, r *http.Request) {
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
