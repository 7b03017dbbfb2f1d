package httpapi

import "context"

// Role is what an operator credential may do. Roles nest: an admin may do
// what an operator may, an operator what a viewer may.
type Role string

const (
	RoleViewer   Role = "viewer"
	RoleOperator Role = "operator"
	RoleAdmin    Role = "admin"
)

// Principal kinds: who stands behind a request.
const (
	KindAnonymous = "anonymous"
	KindOperator  = "operator" // an API token with a role
	KindAgent     = "agent"    // an agent's client certificate (cluster/node)
	KindMember    = "member"   // a coordinator member's certificate
	KindBootstrap = "bootstrap"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	Kind string
	// Name identifies the caller in logs and the audit log: a token's ID
	// and description, "agent:<cluster>/<node>", "member:<id>".
	Name string
	// Role is an operator's role; empty for agents.
	Role    Role
	Cluster string // agents and bootstrap tokens
	Node    string // agents
	// Serial is an agent certificate's serial number (hex), which a
	// renewal replaces.
	Serial string
	// session is the web session ID an operator authenticated with (its
	// cookie), "" otherwise. It never leaves the member: a forwarded
	// principal does not carry it.
	session string
	// token is the API token the session stands for, which a follower
	// sends the leader with a request it forwards (forwardPrincipal).
	token string
}

type principalKey struct{}

// withPrincipal returns ctx carrying p.
func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the caller of the request ctx belongs to
// (anonymous when none was authenticated).
func PrincipalFrom(ctx context.Context) Principal {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok {
		return p
	}
	return Principal{Kind: KindAnonymous, Name: "anonymous"}
}
