package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/trust"
)

// Authentication and authorization. Every route declares what it requires
// (routes.go); authenticate finds out who the caller is, authorizeRoute
// checks the one against the other before the handler runs. On routes the
// leader serves, a follower authenticates and forwards, and the leader
// authorizes (and records, audit.go).
//
// Callers prove who they are by:
//   - a client certificate the cluster CA signed (verified in the TLS
//     handshake): agents ("agent:<cluster>/<node>", accepted only while
//     the certificate's serial is current for a node of the cluster) and
//     members ("member:<id>");
//   - an operator's API token, "Authorization: Bearer <id>.<secret>";
//   - the web view's session cookie, which stands for such a token on the
//     member that set it (session.go); writes need its CSRF header too;
//   - a bootstrap token on the enrollment route, checked on the leader
//     (checkBootstrap) and again by the enrollment itself.
//
// A follower that forwards a request to the leader authenticates it first
// and sends the principal it found in principalHeader; the leader believes
// that header only from a peer whose certificate names a member, and even
// then judges the credential itself where its own state may say otherwise
// than the follower's replica (fresh.go): an operator's request carries
// its token (a session's, put there by the follower) and the leader
// authenticates it; an agent's certificate serial is checked against the
// leader's state again.

// principalHeader carries a forwarded request's principal, JSON.
const principalHeader = "X-Molt-Principal"

// Requirement is what a route demands of its caller.
type Requirement int

const (
	// Public routes answer anyone: health checks.
	Public Requirement = iota + 1
	// NeedViewer, NeedOperator and NeedAdmin require an operator's role
	// at least this high.
	NeedViewer
	NeedOperator
	NeedAdmin
	// NeedAgent requires the agent of the node the URL names
	// ({cluster}/{node}) or, without those parameters, any agent (its
	// handler checks the body names its own node).
	NeedAgent
	// NeedBootstrapToken is enrollment: the handler checks the token.
	NeedBootstrapToken
	// NeedAgentOrViewer is for what agents and operators both read.
	NeedAgentOrViewer
	// NeedMember requires a member's own certificate (not a principal it
	// forwards): what one member asks of another.
	NeedMember
)

func (q Requirement) String() string {
	switch q {
	case Public:
		return "public"
	case NeedViewer:
		return "viewer"
	case NeedOperator:
		return "operator"
	case NeedAdmin:
		return "admin"
	case NeedAgent:
		return "agent"
	case NeedBootstrapToken:
		return "bootstrap-token"
	case NeedAgentOrViewer:
		return "agent-or-viewer"
	case NeedMember:
		return "member"
	}
	return fmt.Sprintf("Requirement(%d)", int(q))
}

var roleRank = map[Role]int{RoleViewer: 1, RoleOperator: 2, RoleAdmin: 3}

// Authenticator checks credentials (trust.go in package coordinator):
// what authentication needs, here and in session.go and relay.go.
type Authenticator interface {
	AuthenticateToken(token string) (api.Token, error)
	// AuthenticateBootstrapToken checks an enrollment's bootstrap token
	// (uses left included).
	AuthenticateBootstrapToken(token string) (api.Token, error)
	// AgentCertValid reports whether the agent certificate with serial
	// is node's current one.
	AgentCertValid(cluster, node, serial string) bool
}

// authenticate finds out who the caller is (routes.go puts it first on
// every route). A credential that is present and wrong is refused (401),
// never treated as anonymous, and so is no credential where the route
// needs one: such a caller is never forwarded, recorded or served.
func (h *handlers) authenticate(rt route) func(http.Handler) http.Handler {
	q := rt.need
	// An operator's credential is judged after a read index (fresh.go)
	// by the member that serves the request: on routes any member serves,
	// this one; on the leader's routes the leader (a follower's judgement
	// only decides whether to forward). The leader's own read index costs
	// no round trip to another member; it makes a leader new in its term
	// apply what its predecessor acknowledged (a deletion) first.
	fresh := q != Public && q != NeedBootstrapToken && !rt.serve.member
	judgeHere := func() bool { return fresh && (!rt.serve.leader || h.leader.IsLeader()) }
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if q == Public { // health checks: whatever credential comes along is not looked at
				next.ServeHTTP(w, r)
				return
			}
			p, err := h.principal(r, q)
			if err != nil && h.behind(r) {
				// The credential may be one this member has not applied
				// yet (it has just restarted, or trails the leader): judge
				// it once caught up with what the client has seen, or
				// answer lagging so that the client asks another member.
				if err = h.catchUp(r); err == nil {
					p, err = h.principal(r, q)
				}
			}
			if err == nil && p.Kind == KindOperator && judgeHere() {
				// The replica accepted the token; judge it again once
				// this member holds every write the leader had
				// acknowledged (a deletion among them). A credential the
				// replica refuses costs no round trip: a stranger's
				// guesses do not reach the leader.
				if err = h.freshen(r.Context()); err == nil {
					p, err = h.principal(r, q)
				}
			}
			if err == nil && p.Kind == KindAnonymous {
				err = &coordinator.RuleError{Rule: "authentication-required", Detail: fmt.Sprintf("%s %s needs a credential (%s)", r.Method, r.URL.Path, q), Err: coordinator.ErrUnauthorized}
			}
			if err != nil {
				writeProblem(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
		})
	}
}

// checkBootstrap authenticates the bootstrap token of an enrollment, on
// the leader (a token just created may not have reached a follower yet):
// the caller becomes "bootstrap-token:<id>", or is refused (401) before
// anything is recorded.
func (h *handlers) checkBootstrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			writeProblem(w, r, &coordinator.RuleError{Rule: "authentication-required", Detail: "enrollment needs a bootstrap token: Authorization: Bearer <token>", Err: coordinator.ErrUnauthorized})
			return
		}
		t, err := h.authn.AuthenticateBootstrapToken(tok)
		if err != nil {
			writeProblem(w, r, err)
			return
		}
		p := Principal{Kind: KindBootstrap, Name: "bootstrap-token:" + t.ID, Cluster: t.Cluster}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// authorizeRoute checks the authenticated caller against the route's
// requirement before the handler runs (403 for a caller who may not). On
// audited writes it runs inside the audit log's middleware, so a refusal
// is recorded (audit.go).
func (h *handlers) authorizeRoute(q Requirement) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := authorize(q, PrincipalFrom(r.Context()), r); err != nil {
				writeProblem(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func (h *handlers) principal(r *http.Request, q Requirement) (Principal, error) {
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		id, err := trust.IdentityOf(cert)
		if err != nil {
			return Principal{}, &coordinator.RuleError{Rule: "certificate-identity", Detail: err.Error(), Err: coordinator.ErrUnauthorized}
		}
		switch id.Kind {
		case "member":
			if fw := r.Header.Get(principalHeader); fw != "" {
				var p Principal
				if err := json.Unmarshal([]byte(fw), &p); err != nil {
					return Principal{}, &coordinator.RuleError{Rule: "forwarded-principal", Detail: err.Error(), Err: coordinator.ErrUnauthorized}
				}
				return h.forwardedPrincipal(r, p)
			}
			return Principal{Kind: KindMember, Name: id.String()}, nil
		case "agent":
			serial := coordinator.SerialOf(cert.SerialNumber.Bytes())
			if !h.authn.AgentCertValid(id.Cluster, id.Node, serial) {
				return Principal{}, errCertRevoked(id.Cluster, id.Node, serial)
			}
			return Principal{Kind: KindAgent, Name: id.String(), Cluster: id.Cluster, Node: id.Node, Serial: serial}, nil
		}
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		if p, ok, err := h.sessionPrincipal(r); ok {
			return p, err
		}
		return Principal{Kind: KindAnonymous, Name: "anonymous"}, nil
	}
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return Principal{}, &coordinator.RuleError{Rule: "authorization-scheme", Detail: "Authorization: want Bearer <token>", Err: coordinator.ErrUnauthorized}
	}
	if q == NeedBootstrapToken {
		// Enrollment checks its bootstrap token itself.
		return Principal{Kind: KindBootstrap, Name: "bootstrap-token"}, nil
	}
	t, err := h.authn.AuthenticateToken(tok)
	if err != nil {
		return Principal{}, err
	}
	return tokenPrincipal(t), nil
}

// forwardedPrincipal is the principal of a request a member forwarded,
// which claims p. The leader believes the member about who an agent or a
// bootstrap token's enrollment is (it holds the connection's certificate,
// or the enrollment checks its token again), but judges what its own state
// may have revoked since the member's replica was written: an operator's
// token, which the forwarded request carries, and an agent certificate's
// serial.
func (h *handlers) forwardedPrincipal(r *http.Request, p Principal) (Principal, error) {
	switch p.Kind {
	case KindOperator:
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			return Principal{}, &coordinator.RuleError{Rule: "forwarded-credential",
				Detail: "a forwarded operator's request carries its API token (Authorization: Bearer), which the leader checks itself; this one has none (a member of an older release forwarded it): send it to the leader",
				Err:    coordinator.ErrUnauthorized}
		}
		t, err := h.authn.AuthenticateToken(tok)
		if err != nil {
			return Principal{}, err
		}
		return tokenPrincipal(t), nil
	case KindAgent:
		if !h.authn.AgentCertValid(p.Cluster, p.Node, p.Serial) {
			return Principal{}, errCertRevoked(p.Cluster, p.Node, p.Serial)
		}
	}
	return p, nil
}

func authorize(q Requirement, p Principal, r *http.Request) error {
	if q == Public || q == NeedBootstrapToken {
		return nil
	}
	if p.Kind == KindAnonymous {
		return &coordinator.RuleError{Rule: "authentication-required", Detail: fmt.Sprintf("%s %s needs a credential (%s)", r.Method, r.URL.Path, q), Err: coordinator.ErrUnauthorized}
	}
	forbid := func(why string) error {
		return &coordinator.RuleError{Rule: "role-" + q.String(), Detail: fmt.Sprintf("%s may not %s %s: %s", p.Name, r.Method, r.URL.Path, why), Err: coordinator.ErrForbidden}
	}
	switch q {
	case NeedViewer, NeedOperator, NeedAdmin, NeedAgentOrViewer:
		if q == NeedAgentOrViewer && p.Kind == KindAgent {
			return nil
		}
		need := map[Requirement]Role{NeedViewer: RoleViewer, NeedOperator: RoleOperator, NeedAdmin: RoleAdmin, NeedAgentOrViewer: RoleViewer}[q]
		if p.Kind != KindOperator {
			return forbid(fmt.Sprintf("needs an operator credential with role %s", need))
		}
		if roleRank[p.Role] < roleRank[need] {
			return forbid(fmt.Sprintf("role %s, needs %s", p.Role, need))
		}
		return nil
	case NeedAgent:
		if p.Kind != KindAgent {
			return forbid("needs an agent certificate")
		}
		c, n := chi.URLParam(r, "cluster"), chi.URLParam(r, "node")
		if (c != "" || n != "") && (c != p.Cluster || n != p.Node) {
			return forbid(fmt.Sprintf("an agent may touch only its own node %s/%s", p.Cluster, p.Node))
		}
		return nil
	case NeedMember:
		if p.Kind != KindMember {
			return forbid("needs a member certificate")
		}
		return nil
	}
	return forbid("unknown requirement")
}

// errCertRevoked refuses an agent certificate that is not current for
// its node.
func errCertRevoked(cluster, node, serial string) error {
	return &coordinator.RuleError{Rule: "certificate-revoked",
		Detail: fmt.Sprintf("certificate %s of %s/%s is not current (renewed since, or the node or cluster was removed)", serial, cluster, node), Err: coordinator.ErrUnauthorized}
}

// checkAgentBody refuses an agent whose request body names another node
// (register, heartbeat).
func checkAgentBody(r *http.Request, cluster, node string) error {
	p := PrincipalFrom(r.Context())
	if p.Kind != KindAgent || p.Cluster != cluster || p.Node != node {
		return &coordinator.RuleError{Rule: "role-agent", Detail: fmt.Sprintf("%s may not act for %s/%s", p.Name, cluster, node), Err: coordinator.ErrForbidden}
	}
	return nil
}

// forwardPrincipal is what a follower adds to a request it forwards. The
// web session cookie stays behind: it means nothing to the leader. The
// token it stands for goes in its place, over the members' mutual TLS, so
// that the leader judges the credential itself (forwardedPrincipal).
func forwardPrincipal(r *http.Request) {
	p := PrincipalFrom(r.Context())
	b, _ := json.Marshal(p)
	r.Header.Set(principalHeader, string(b))
	r.Header.Del("Cookie")
	if p.session != "" {
		r.Header.Set("Authorization", "Bearer "+p.token)
	}
}
