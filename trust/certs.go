package trust

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Certificate identities. A certificate's subject says who holds it:
// CommonName "member:<id>" in organisation "molt:members" for coordinator
// members, "agent:<cluster>/<node>" in "molt:agents" for agents.
const (
	OrgMembers = "molt:members"
	OrgAgents  = "molt:agents"
)

// Lifetimes of the certificates the CA signs.
const (
	MemberCertLifetime = 365 * 24 * time.Hour
	AgentCertLifetime  = 30 * 24 * time.Hour
)

// Identity is who a certificate names.
type Identity struct {
	// Kind is "member" or "agent".
	Kind    string
	Member  string // members
	Cluster string // agents
	Node    string // agents
}

// String is the certificate's common name.
func (id Identity) String() string {
	if id.Kind == "agent" {
		return "agent:" + id.Cluster + "/" + id.Node
	}
	return "member:" + id.Member
}

// AgentIdentity names the agent of node in cluster.
func AgentIdentity(cluster, node string) Identity {
	return Identity{Kind: "agent", Cluster: cluster, Node: node}
}

// IdentityOf reads who a certificate the CA signed names. It does not
// verify the certificate: the TLS handshake did.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	cn := cert.Subject.CommonName
	org := ""
	if len(cert.Subject.Organization) == 1 {
		org = cert.Subject.Organization[0]
	}
	switch {
	case org == OrgMembers && strings.HasPrefix(cn, "member:") && len(cn) > len("member:"):
		return Identity{Kind: "member", Member: strings.TrimPrefix(cn, "member:")}, nil
	case org == OrgAgents && strings.HasPrefix(cn, "agent:"):
		c, n, ok := strings.Cut(strings.TrimPrefix(cn, "agent:"), "/")
		if ok && c != "" && n != "" && !strings.Contains(n, "/") {
			return AgentIdentity(c, n), nil
		}
	}
	return Identity{}, fmt.Errorf("certificate subject %q names no molt member or agent", cert.Subject.String())
}

// IssueMember signs a server-and-client certificate for a coordinator
// member: it serves the REST API and Raft, and dials other members' Raft
// and forwards requests to the leader with it. hosts are its DNS names
// and IP addresses.
func (ca *CA) IssueMember(id string, hosts []string, pub crypto.PublicKey, now time.Time) ([]byte, error) {
	if id == "" {
		return nil, errors.New("member certificate: empty member ID")
	}
	tmpl := &x509.Certificate{
		SerialNumber: newSerial(),
		Subject:      pkix.Name{CommonName: "member:" + id, Organization: []string{OrgMembers}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(MemberCertLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, err
	}
	return EncodeCert(der), nil
}

// NewCSR makes a certificate signing request for id with key.
func NewCSR(id Identity, key crypto.Signer) ([]byte, error) { return NewCSRFor(id, key, nil) }

// NewCSRFor is NewCSR asking also for host names and addresses (members).
func NewCSRFor(id Identity, key crypto.Signer, hosts []string) ([]byte, error) {
	org := OrgAgents
	if id.Kind == "member" {
		org = OrgMembers
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: id.String(), Organization: []string{org}}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// ParseCSR decodes a CSR and checks its self-signature.
func ParseCSR(pemBytes []byte) (*x509.CertificateRequest, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil || b.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("csr: no CERTIFICATE REQUEST PEM block")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("csr: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("csr: signature: %w", err)
	}
	return csr, nil
}

// ErrCSRIdentity is returned when a CSR names someone other than the
// caller may get a certificate for.
var ErrCSRIdentity = errors.New("csr names another identity")

// SignAgent signs an agent's CSR into a client certificate naming want,
// valid from now for lifetime. The CSR must name want exactly: an agent
// enrolling as worker-1 cannot get a certificate for worker-2.
func (ca *CA) SignAgent(csrPEM []byte, want Identity, now time.Time, lifetime time.Duration) (cert []byte, parsed *x509.Certificate, err error) {
	csr, err := ParseCSR(csrPEM)
	if err != nil {
		return nil, nil, err
	}
	if csr.Subject.CommonName != want.String() {
		return nil, nil, fmt.Errorf("%w: csr is for %q, caller is %q", ErrCSRIdentity, csr.Subject.CommonName, want.String())
	}
	tmpl := &x509.Certificate{
		SerialNumber: newSerial(),
		Subject:      pkix.Name{CommonName: want.String(), Organization: []string{OrgAgents}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	parsed, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return EncodeCert(der), parsed, nil
}

// RenewAt is when a certificate should be renewed: at two thirds of its
// lifetime, as kubelet's certificate manager does (it jitters within
// 70–90%; one fixed point keeps tests exact).
func RenewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(life * 2 / 3)
}
