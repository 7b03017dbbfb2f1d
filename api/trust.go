package api

import "time"

// EnrollRequest is an agent's first call, POST /v1/agents/enroll with its
// bootstrap token as bearer credential: a CSR for "agent:<cluster>/<node>"
// made with a key that never leaves the host.
type EnrollRequest struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	// CSR is the PEM certificate signing request.
	CSR string `json:"csr"`
}

// EnrollResponse carries the agent's client certificate and the CA that
// signed it (the one the agent's pin matched).
type EnrollResponse struct {
	Certificate string    `json:"certificate"`
	CA          string    `json:"ca"`
	NotAfter    time.Time `json:"notAfter"`
}

// RenewRequest renews an agent's certificate before it expires:
// POST /v1/agents/{cluster}/{node}/certificate over mTLS with the current
// certificate. The answer is an EnrollResponse.
type RenewRequest struct {
	CSR string `json:"csr"`
}

// Token kinds.
const (
	TokenBootstrap = "bootstrap" // enrolls agents of one cluster
	TokenAPI       = "api"       // an operator's credential with a role
)

// TokenRequest creates a token: POST /v1/tokens (admin).
type TokenRequest struct {
	Kind string `json:"kind"`
	// Cluster is the one cluster a bootstrap token enrolls agents into.
	Cluster string `json:"cluster,omitempty"`
	// Role of an API token: viewer, operator or admin.
	Role string `json:"role,omitempty"`
	// TTL in Go duration syntax; bootstrap tokens default to 24h, API
	// tokens to never expiring ("0").
	TTL string `json:"ttl,omitempty"`
	// Uses bounds how many agents a bootstrap token enrolls (default 1).
	Uses        int    `json:"uses,omitempty"`
	Description string `json:"description,omitempty"`
}

// Token describes a stored token. Secret is set only in the answer that
// created it; the coordinator keeps a hash.
type Token struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	Cluster     string    `json:"cluster,omitempty"`
	Role        string    `json:"role,omitempty"`
	Description string    `json:"description,omitempty"`
	Expires     time.Time `json:"expires,omitzero"`
	Uses        int       `json:"uses,omitempty"`
	Used        int       `json:"used,omitempty"`
	CreatedBy   string    `json:"createdBy,omitempty"`
	Created     time.Time `json:"created"`
	// Secret is the whole token, "<id>.<secret>", shown once.
	Secret string `json:"token,omitempty"`
}
