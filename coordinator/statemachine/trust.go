package statemachine

import (
	"fmt"
	"slices"
	"time"
)

// Credentials: operators' API tokens, agents' bootstrap tokens, and the
// serial numbers of the agent certificates the CA signed. Only hashes of
// token secrets are replicated; certificates themselves are not stored,
// only which serials are current for each node, so that deleting a node or
// a cluster revokes its certificates (the coordinator accepts an agent's
// certificate only while its serial is listed here).

// Token kinds and roles, as the API names them.
const (
	TokenKindBootstrap = "bootstrap"
	TokenKindAPI       = "api"
)

// keptAgentSerials is how many certificates of one node stay valid: the
// newest and the one before it, so connections opened just before a
// renewal keep working until they close.
const keptAgentSerials = 2

// TokenRecord is a stored token.
type TokenRecord struct {
	ID         string
	Kind       string
	SecretHash string
	// Cluster is the only cluster a bootstrap token enrolls agents into.
	Cluster string
	// Role of an API token: viewer, operator or admin.
	Role        string
	Description string
	// Expires is zero for a token that does not expire.
	Expires time.Time
	// Uses bounds a bootstrap token's enrollments; Used counts them.
	Uses      int
	Used      int
	CreatedBy string
	Created   time.Time
}

// Expired reports whether the token no longer authenticates at now.
func (t *TokenRecord) Expired(now time.Time) bool {
	return !t.Expires.IsZero() && !now.Before(t.Expires)
}

// PutTokenCmd (CmdPutToken) stores a new token.
type PutTokenCmd struct {
	Token TokenRecord
	Now   time.Time
}

// DeleteTokenCmd (CmdDeleteToken) revokes a token.
type DeleteTokenCmd struct {
	ID  string
	Now time.Time
}

// EnrollAgentCmd (CmdEnrollAgent) spends one use of a bootstrap token on
// the certificate the leader signed for an agent.
type EnrollAgentCmd struct {
	TokenID       string
	Cluster, Node string
	Serial        string
	Now           time.Time
}

// RenewAgentCertCmd (CmdRenewAgentCert) records the certificate an agent
// renewed its current one (Old) for.
type RenewAgentCertCmd struct {
	Cluster, Node string
	Old, Serial   string
	Now           time.Time
}

// CheckToken is the rule an API or bootstrap token must pass at now:
// known, unexpired, of the kind wanted, with uses left. The service calls
// it before proposing, and the apply functions again on the state the
// entry lands on.
func (s *state) checkToken(id, kind string, now time.Time) (*TokenRecord, error) {
	t, ok := s.Tokens[id]
	if !ok {
		return nil, &RuleError{Rule: "token-unknown", Detail: fmt.Sprintf("token %s is not known (revoked, or never created)", id), Err: ErrUnauthenticated}
	}
	if t.Kind != kind {
		return nil, &RuleError{Rule: "token-kind", Detail: fmt.Sprintf("token %s is a %s token, not a %s token", id, t.Kind, kind), Err: ErrUnauthenticated}
	}
	if t.Expired(now) {
		return nil, &RuleError{Rule: "token-expired", Detail: fmt.Sprintf("token %s expired at %s", id, t.Expires.Format(time.RFC3339)), Err: ErrUnauthenticated}
	}
	if kind == TokenKindBootstrap && t.Used >= t.Uses {
		return nil, &RuleError{Rule: "token-used-up", Detail: fmt.Sprintf("bootstrap token %s has enrolled %d of %d agents", id, t.Used, t.Uses), Err: ErrUnauthenticated}
	}
	return t, nil
}

func (s *state) putToken(c PutTokenCmd) (any, error) {
	t := c.Token
	switch {
	case t.ID == "" || t.SecretHash == "":
		return nil, &RuleError{Rule: "token-invalid", Detail: "a token needs an ID and a secret hash", Err: ErrInvalid}
	case t.Kind == TokenKindBootstrap:
		// The cluster need not be registered yet: hosts are often
		// provisioned, with their agents' tokens, before the cluster is
		// registered with molt. Enrollment checks the cluster and node.
		if t.Cluster == "" {
			return nil, &RuleError{Rule: "token-cluster", Detail: "a bootstrap token names the cluster its agents join", Err: ErrInvalid}
		}
		if t.Uses < 1 || t.Expires.IsZero() {
			return nil, &RuleError{Rule: "token-invalid", Detail: "a bootstrap token needs at least one use and an expiry", Err: ErrInvalid}
		}
	case t.Kind == TokenKindAPI:
		if t.Role != "viewer" && t.Role != "operator" && t.Role != "admin" {
			return nil, &RuleError{Rule: "token-role", Detail: fmt.Sprintf("role %q: want viewer, operator or admin", t.Role), Err: ErrInvalid}
		}
	default:
		return nil, &RuleError{Rule: "token-kind", Detail: fmt.Sprintf("kind %q: want bootstrap or api", t.Kind), Err: ErrInvalid}
	}
	if _, ok := s.Tokens[t.ID]; ok {
		return nil, &RuleError{Rule: "token-exists", Detail: fmt.Sprintf("token %s exists", t.ID), Err: ErrConflict}
	}
	// Expired tokens are forgotten here, on a write that already changes
	// the table, so the table stays bounded without a clock of its own.
	for id, o := range s.Tokens {
		if o.Expired(c.Now) {
			delete(s.Tokens, id)
		}
	}
	t.Created = c.Now
	s.Tokens[t.ID] = &t
	return nil, nil
}

func (s *state) deleteToken(c DeleteTokenCmd) (any, error) {
	if _, ok := s.Tokens[c.ID]; !ok {
		return nil, fmt.Errorf("token %s: %w", c.ID, ErrNotFound)
	}
	delete(s.Tokens, c.ID)
	return nil, nil
}

// checkEnroll is the rule an enrollment must pass.
func (s *state) checkEnroll(tokenID, cluster, node string, now time.Time) (*TokenRecord, *ClusterRecord, error) {
	t, err := s.checkToken(tokenID, TokenKindBootstrap, now)
	if err != nil {
		return nil, nil, err
	}
	if t.Cluster != cluster {
		return nil, nil, &RuleError{Rule: "token-cluster", Detail: fmt.Sprintf("bootstrap token %s enrolls agents of cluster %s, not %s", t.ID, t.Cluster, cluster), Err: ErrForbidden}
	}
	r, err := s.cluster(cluster)
	if err != nil {
		return nil, nil, err
	}
	if !r.Spec.HasNode(node) {
		return nil, nil, &RuleError{Rule: "node-unknown", Detail: fmt.Sprintf("cluster %s has no node %s", cluster, node), Err: ErrForbidden}
	}
	return t, r, nil
}

func (s *state) enrollAgent(c EnrollAgentCmd) (any, error) {
	t, r, err := s.checkEnroll(c.TokenID, c.Cluster, c.Node, c.Now)
	if err != nil {
		return nil, err
	}
	t.Used++
	r.addAgentSerial(c.Node, c.Serial)
	return nil, nil
}

func (s *state) renewAgentCert(c RenewAgentCertCmd) (any, error) {
	r, err := s.cluster(c.Cluster)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(r.AgentCerts[c.Node], c.Old) {
		return nil, &RuleError{Rule: "certificate-revoked", Detail: fmt.Sprintf("certificate %s of %s/%s is no longer valid", c.Old, c.Cluster, c.Node), Err: ErrUnauthenticated}
	}
	r.addAgentSerial(c.Node, c.Serial)
	return nil, nil
}

func (r *ClusterRecord) addAgentSerial(node, serial string) {
	if r.AgentCerts == nil {
		r.AgentCerts = map[string][]string{}
	}
	l := append(r.AgentCerts[node], serial)
	if len(l) > keptAgentSerials {
		l = l[len(l)-keptAgentSerials:]
	}
	r.AgentCerts[node] = l
}

// pruneAgentCerts revokes the certificates of nodes the spec no longer has.
func (r *ClusterRecord) pruneAgentCerts() {
	for n := range r.AgentCerts {
		if !r.Spec.HasNode(n) {
			delete(r.AgentCerts, n)
		}
	}
}
