package coordinator

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/trust"
)

// Credentials: API tokens for operators, bootstrap tokens with which agents
// enroll, and the agent certificates the CA signs. Every refusal names its
// rule and is decided before anything is proposed; the apply functions
// check the same rules again on the state the entry lands on.

// DefaultBootstrapTokenTTL is a bootstrap token's lifetime when the request
// names none, as kubeadm's.
const DefaultBootstrapTokenTTL = 24 * time.Hour

// maxTokenTTL bounds any token's lifetime.
const maxTokenTTL = 10 * 365 * 24 * time.Hour

// maxBootstrapUses bounds how many agents one bootstrap token enrolls.
const maxBootstrapUses = 100000

// AuthenticateToken checks an operator's API token: its form, that it is
// stored, unexpired, and that the secret matches.
func (c *Coordinator) AuthenticateToken(token string) (api.Token, error) {
	t, err := c.checkSecret(token, statemachine.TokenKindAPI)
	if err != nil {
		return api.Token{}, err
	}
	return tokenToAPI(t), nil
}

// AuthenticateBootstrapToken checks a bootstrap token as AuthenticateToken
// checks an API token, uses left included: the HTTP layer authenticates
// enrollment with it before anything is recorded.
func (c *Coordinator) AuthenticateBootstrapToken(token string) (api.Token, error) {
	t, err := c.checkSecret(token, statemachine.TokenKindBootstrap)
	if err != nil {
		return api.Token{}, err
	}
	return tokenToAPI(t), nil
}

func (c *Coordinator) checkSecret(token, kind string) (statemachine.TokenRecord, error) {
	id, secret, err := trust.ParseToken(token)
	if err != nil {
		return statemachine.TokenRecord{}, &RuleError{Rule: "token-malformed", Detail: err.Error(), Err: ErrUnauthorized}
	}
	t, err := c.sm.CheckToken(id, kind, c.cfg.Clock.Now())
	if err != nil {
		return statemachine.TokenRecord{}, err
	}
	if !trust.SecretMatches(secret, t.SecretHash) {
		return statemachine.TokenRecord{}, &RuleError{Rule: "token-secret", Detail: fmt.Sprintf("token %s: wrong secret", id), Err: ErrUnauthorized}
	}
	return t, nil
}

// AgentCertValid reports whether an agent certificate's serial is current
// for its node (not renewed twice since, not revoked by removing the node
// or its cluster).
func (c *Coordinator) AgentCertValid(cluster, node, serial string) bool {
	return c.sm.AgentCertValid(cluster, node, serial)
}

// CreateToken stores a new token and returns it with its secret, shown
// this once.
func (c *Coordinator) CreateToken(ctx context.Context, req api.TokenRequest, by string) (api.Token, error) {
	now := c.cfg.Clock.Now()
	rec := statemachine.TokenRecord{Kind: req.Kind, Cluster: req.Cluster, Role: req.Role, Description: req.Description, Uses: req.Uses, CreatedBy: by}
	ttl := time.Duration(0)
	if req.TTL != "" {
		d, err := time.ParseDuration(req.TTL)
		if err != nil || d < 0 || d > maxTokenTTL {
			return api.Token{}, &RuleError{Rule: "token-ttl", Detail: fmt.Sprintf("ttl %q: want a duration between 0 and %s", req.TTL, maxTokenTTL), Err: ErrInvalid}
		}
		ttl = d
	}
	if len(req.Description) > 256 {
		return api.Token{}, &RuleError{Rule: "token-description", Detail: "description: at most 256 bytes", Err: ErrInvalid}
	}
	secretLen := trust.APISecretLen
	switch req.Kind {
	case api.TokenBootstrap:
		secretLen = trust.BootstrapSecretLen
		if ttl == 0 {
			ttl = DefaultBootstrapTokenTTL
		}
		if rec.Uses == 0 {
			rec.Uses = 1
		}
		if rec.Uses < 0 || rec.Uses > maxBootstrapUses {
			return api.Token{}, &RuleError{Rule: "token-uses", Detail: fmt.Sprintf("uses %d: want 1 to %d", rec.Uses, maxBootstrapUses), Err: ErrInvalid}
		}
		if req.Role != "" {
			return api.Token{}, &RuleError{Rule: "token-role", Detail: "a bootstrap token has no role", Err: ErrInvalid}
		}
		if req.Cluster == "" {
			return api.Token{}, &RuleError{Rule: "token-cluster", Detail: "a bootstrap token names the cluster its agents join (--cluster)", Err: ErrInvalid}
		}
		// The cluster may be registered later, but under a name that can
		// be registered: the rule registration applies (or one registered
		// before that rule, which stays readable and has agents).
		if err := phases.CheckClusterName(req.Cluster); err != nil {
			if _, notRegistered := c.sm.Cluster(req.Cluster); notRegistered != nil {
				return api.Token{}, err
			}
		}
	case api.TokenAPI:
		if req.Cluster != "" || req.Uses != 0 {
			return api.Token{}, &RuleError{Rule: "token-invalid", Detail: "an API token has no cluster and no uses", Err: ErrInvalid}
		}
		if req.Role != "viewer" && req.Role != "operator" && req.Role != "admin" {
			return api.Token{}, &RuleError{Rule: "token-role", Detail: fmt.Sprintf("role %q: want viewer, operator or admin", req.Role), Err: ErrInvalid}
		}
	default:
		return api.Token{}, &RuleError{Rule: "token-kind", Detail: fmt.Sprintf("kind %q: want bootstrap or api", req.Kind), Err: ErrInvalid}
	}
	if ttl > 0 {
		rec.Expires = now.Add(ttl)
	}
	tok, id := trust.NewToken(secretLen)
	rec.ID = id
	_, secret, _ := trust.ParseToken(tok)
	rec.SecretHash = trust.HashSecret(secret)
	noteAudit(ctx, func(r *AuditRecord) {
		r.Cluster = rec.Cluster
		if rec.Kind == api.TokenBootstrap {
			r.Detail = fmt.Sprintf("bootstrap token %s, %d use(s), expires %s", rec.ID, rec.Uses, rec.Expires.Format(time.RFC3339))
		} else {
			r.Detail = fmt.Sprintf("API token %s, role %s", rec.ID, rec.Role)
		}
	})
	if _, err := c.apply(ctx, statemachine.PutTokenCmd{Token: rec, Now: now}); err != nil {
		return api.Token{}, err
	}
	rec.Created = now
	out := tokenToAPI(rec)
	out.Secret = tok
	return out, nil
}

// Tokens lists the stored tokens, without secrets.
func (c *Coordinator) Tokens() []api.Token {
	ts := c.sm.Tokens()
	out := make([]api.Token, len(ts))
	for i, t := range ts {
		out[i] = tokenToAPI(t)
	}
	return out
}

// DeleteToken revokes a token.
func (c *Coordinator) DeleteToken(ctx context.Context, id string) error {
	if _, ok := c.sm.Token(id); !ok {
		return fmt.Errorf("token %s: %w", id, ErrNotFound)
	}
	_, err := c.apply(ctx, statemachine.DeleteTokenCmd{ID: id, Now: c.cfg.Clock.Now()})
	return err
}

func tokenToAPI(t statemachine.TokenRecord) api.Token {
	return api.Token{ID: t.ID, Kind: t.Kind, Cluster: t.Cluster, Role: t.Role, Description: t.Description,
		Expires: t.Expires, Uses: t.Uses, Used: t.Used, CreatedBy: t.CreatedBy, Created: t.Created}
}

// Enroll signs an agent's CSR into a client certificate for cluster/node,
// spending one use of the bootstrap token it presents. The CSR must name
// that node, the token must be for that cluster, and the node must be in
// the cluster's spec.
func (c *Coordinator) Enroll(ctx context.Context, bearer string, req api.EnrollRequest) (api.EnrollResponse, error) {
	if c.cfg.CA == nil {
		return api.EnrollResponse{}, &RuleError{Rule: "no-ca", Detail: "this coordinator has no CA to sign agent certificates", Err: ErrInvalid}
	}
	tok, err := c.checkSecret(bearer, statemachine.TokenKindBootstrap)
	if err != nil {
		return api.EnrollResponse{}, err
	}
	now := c.cfg.Clock.Now()
	if err := c.sm.CheckEnroll(tok.ID, req.Cluster, req.Node, now); err != nil {
		return api.EnrollResponse{}, err
	}
	certPEM, cert, err := c.signAgent(req.CSR, req.Cluster, req.Node, now)
	if err != nil {
		return api.EnrollResponse{}, err
	}
	cmd := statemachine.EnrollAgentCmd{TokenID: tok.ID, Cluster: req.Cluster, Node: req.Node, Serial: SerialOf(cert.SerialNumber.Bytes()), Now: now}
	noteAudit(ctx, func(r *AuditRecord) {
		r.Cluster, r.Node, r.Detail = req.Cluster, req.Node, "certificate serial "+cmd.Serial
	})
	if _, err := c.apply(ctx, cmd); err != nil {
		return api.EnrollResponse{}, err
	}
	c.log.Info("agent enrolled", "cluster", req.Cluster, "node", req.Node, "token", tok.ID, "serial", cmd.Serial, "not_after", cert.NotAfter)
	return api.EnrollResponse{Certificate: string(certPEM), CA: string(c.cfg.CA.CertPEM), NotAfter: cert.NotAfter}, nil
}

// RenewAgentCert signs a new certificate for an agent that presents a
// current one (serial old).
func (c *Coordinator) RenewAgentCert(ctx context.Context, cluster, node, old string, req api.RenewRequest) (api.EnrollResponse, error) {
	if c.cfg.CA == nil {
		return api.EnrollResponse{}, &RuleError{Rule: "no-ca", Detail: "this coordinator has no CA to sign agent certificates", Err: ErrInvalid}
	}
	if !c.sm.AgentCertValid(cluster, node, old) {
		return api.EnrollResponse{}, &RuleError{Rule: "certificate-revoked", Detail: fmt.Sprintf("certificate %s of %s/%s is no longer valid", old, cluster, node), Err: ErrUnauthorized}
	}
	now := c.cfg.Clock.Now()
	certPEM, cert, err := c.signAgent(req.CSR, cluster, node, now)
	if err != nil {
		return api.EnrollResponse{}, err
	}
	cmd := statemachine.RenewAgentCertCmd{Cluster: cluster, Node: node, Old: old, Serial: SerialOf(cert.SerialNumber.Bytes()), Now: now}
	noteAudit(ctx, func(r *AuditRecord) { r.Detail = "certificate serial " + old + " → " + cmd.Serial })
	if _, err := c.apply(ctx, cmd); err != nil {
		return api.EnrollResponse{}, err
	}
	c.log.Info("agent certificate renewed", "cluster", cluster, "node", node, "serial", cmd.Serial, "not_after", cert.NotAfter)
	return api.EnrollResponse{Certificate: string(certPEM), CA: string(c.cfg.CA.CertPEM), NotAfter: cert.NotAfter}, nil
}

func (c *Coordinator) signAgent(csr, cluster, node string, now time.Time) ([]byte, *x509.Certificate, error) {
	certPEM, cert, err := c.cfg.CA.SignAgent([]byte(csr), trust.AgentIdentity(cluster, node), now, c.cfg.AgentCertLifetime)
	if err != nil {
		return nil, nil, &RuleError{Rule: "csr-invalid", Detail: err.Error(), Err: ErrForbidden}
	}
	return certPEM, cert, nil
}

// SerialOf is how certificate serial numbers are written in the state.
func SerialOf(b []byte) string { return hex.EncodeToString(b) }

// ensureBootstrapAdmin stores the bootstrap admin token while the state
// holds no API token at all: a new coordinator's first credential. The
// leader does it at the start of each term, so a crash between writing the
// token file and storing it is healed by the next leader. Once any API
// token exists it does nothing, so a revoked bootstrap token stays revoked.
func (c *Coordinator) ensureBootstrapAdmin(ctx context.Context) {
	b := c.cfg.BootstrapAdmin
	if b == nil {
		return
	}
	for _, t := range c.sm.Tokens() {
		if t.Kind == statemachine.TokenKindAPI {
			return
		}
	}
	if _, err := c.apply(ctx, statemachine.PutTokenCmd{Token: *b, Now: c.cfg.Clock.Now()}); err != nil {
		c.log.Warn("store the bootstrap admin token", "err", err)
		return
	}
	c.log.Info("bootstrap admin token stored", "id", b.ID)
}

// MemberCertificate signs the certificate a member serves and dials Raft
// with, before it joins, and hands it the CA it will sign agents'
// certificates with when it leads, and the encryption key ring it will
// open kubeconfigs with (the route is admin only; a member holds
// everything the coordinator holds anyway).
func (c *Coordinator) MemberCertificate(ctx context.Context, r api.JoinRequest) (api.JoinResponse, error) {
	noteAudit(ctx, func(a *AuditRecord) { a.Detail = "certificate, CA key and encryption keys for member " + r.ID })
	if c.cfg.CA == nil {
		return api.JoinResponse{}, &RuleError{Rule: "no-ca", Detail: "this coordinator has no CA to sign a member certificate", Err: ErrInvalid}
	}
	if r.ID == "" || r.RaftAddr == "" || r.CSR == "" {
		return api.JoinResponse{}, &RuleError{Rule: "member", Detail: "id, raftAddr and csr are required", Err: ErrInvalid}
	}
	cert, err := c.signMember(r)
	if err != nil {
		return api.JoinResponse{}, err
	}
	resp := api.JoinResponse{ID: r.ID, Certificate: string(cert), CA: string(c.cfg.CA.CertPEM), CAKey: string(c.cfg.CA.KeyPEM)}
	if c.cfg.Keyring != nil {
		resp.EncryptionKeys = string(c.cfg.Keyring.Marshal())
	}
	return resp, nil
}

// signMember signs a joining member's CSR for the hosts of its addresses
// and the names the CSR asks for.
func (c *Coordinator) signMember(r api.JoinRequest) ([]byte, error) {
	csr, err := trust.ParseCSR([]byte(r.CSR))
	if err != nil {
		return nil, &RuleError{Rule: "csr-invalid", Detail: err.Error(), Err: ErrInvalid}
	}
	hosts := append([]string(nil), csr.DNSNames...)
	for _, ip := range csr.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	for _, a := range []string{r.RaftAddr, r.HTTPAddr} {
		if h, _, err := net.SplitHostPort(a); err == nil {
			hosts = append(hosts, h)
		}
	}
	return c.cfg.CA.IssueMember(r.ID, hosts, csr.PublicKey, c.cfg.Clock.Now())
}
