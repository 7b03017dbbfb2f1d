package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/internal/tlsaccept"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/seal"
	"github.com/moltproject/molt/trust"
)

// Files of a member's trust material under its data directory.
const (
	tlsDirName     = "tls"
	caCertFile     = "ca.crt"
	caKeyFile      = "ca.key"
	memberCertFile = "member.crt"
	memberKeyFile  = "member.key"
	adminTokenFile = "admin.token"
)

// memberTLS is what a member serves and dials with: the cluster CA and its
// own certificate.
type memberTLS struct {
	dir  string
	ca   *trust.CA
	cert atomic.Pointer[tls.Certificate]
}

func (m *memberTLS) getCert() (*tls.Certificate, error) { return m.cert.Load(), nil }

// bootstrapTLS makes sure a bootstrapping member has a CA (its own, or the
// one given by --ca-cert/--ca-key, copied into the data directory) and a
// certificate for hosts.
func bootstrapTLS(dataDir, caCert, caKey, id string, hosts []string, now time.Time) (*memberTLS, error) {
	dir := filepath.Join(dataDir, tlsDirName)
	m := &memberTLS{dir: dir}
	var err error
	switch {
	case exists(filepath.Join(dir, caCertFile)):
		m.ca, err = trust.LoadCA(filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile))
	case caCert != "" || caKey != "":
		if caCert == "" || caKey == "" {
			return nil, errors.New("--ca-cert and --ca-key go together")
		}
		m.ca, err = trust.LoadCA(caCert, caKey)
		if err == nil {
			err = m.writeCA()
		}
	default:
		m.ca, err = trust.NewCA("molt cluster CA", now)
		if err == nil {
			err = m.writeCA()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	if err := m.loadOrIssue(id, hosts, now); err != nil {
		return nil, err
	}
	return m, nil
}

// loadTLS reads a member's trust material written at bootstrap or join.
func loadTLS(dataDir, id string, hosts []string, now time.Time) (*memberTLS, error) {
	dir := filepath.Join(dataDir, tlsDirName)
	ca, err := trust.LoadCA(filepath.Join(dir, caCertFile), filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, fmt.Errorf("cluster CA in %s: %w", dir, err)
	}
	m := &memberTLS{dir: dir, ca: ca}
	return m, m.loadOrIssue(id, hosts, now)
}

func (m *memberTLS) writeCA() error {
	if err := trust.WriteFileAtomic(filepath.Join(m.dir, caKeyFile), m.ca.KeyPEM, 0o600); err != nil {
		return err
	}
	return trust.WriteFileAtomic(filepath.Join(m.dir, caCertFile), m.ca.CertPEM, 0o644)
}

// loadOrIssue loads the member certificate, or issues a new one when it is
// missing, expires within a month, or does not cover hosts (the member's
// addresses changed). The member holds the CA key, so it signs its own.
func (m *memberTLS) loadOrIssue(id string, hosts []string, now time.Time) error {
	certPath, keyPath := filepath.Join(m.dir, memberCertFile), filepath.Join(m.dir, memberKeyFile)
	if kp, err := trust.LoadKeyPair(certPath, keyPath, m.ca.Cert); err == nil {
		if leaf, err := x509.ParseCertificate(kp.Certificate[0]); err == nil && leaf.NotAfter.After(now.Add(30*24*time.Hour)) && covers(leaf, hosts) {
			m.cert.Store(&kp)
			return nil
		}
	}
	key, err := trust.NewKey()
	if err != nil {
		return err
	}
	certPEM, err := m.ca.IssueMember(id, hosts, key.Public(), now)
	if err != nil {
		return err
	}
	keyPEM, err := trust.EncodeKey(key)
	if err != nil {
		return err
	}
	// Key first: a crash between the two writes leaves a new key beside
	// the old certificate, which fails to load and is issued again.
	if err := trust.WriteFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	if err := trust.WriteFileAtomic(certPath, certPEM, 0o644); err != nil {
		return err
	}
	kp, err := trust.KeyPair(certPEM, keyPEM, m.ca.Cert)
	if err != nil {
		return err
	}
	m.cert.Store(&kp)
	return nil
}

func covers(cert *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if h != "" && cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// serverTLS is the REST API's TLS: the member certificate, client
// certificates verified when sent (agents, members). It offers HTTP/2,
// whose pings let agents and forwarding members notice a member that
// stopped answering (client.ConfigureTransport).
func (m *memberTLS) serverTLS() *tls.Config {
	c := trust.ServerConfig(m.ca.Pool(), m.getCert)
	c.NextProtos = client.ServerProtocols
	return c
}

// Bounds of the API's TLS listener. Agents (thousands, one address each)
// and operators connect here, so they are wider than the Raft port's
// defaults: a member restart makes its agents reconnect together, and a
// site's agents may share one NAT address. A connection closed for them
// (its address at its bound, or the oldest handshake when every slot is
// taken) is retried by its agent.
const (
	apiMaxHandshakes        = 1024
	apiMaxHandshakesPerHost = 64
)

// apiListener is the API's TLS listener: it finishes each handshake before
// net/http sees the connection, within tlsaccept's 10 s, with at most
// apiMaxHandshakes in progress (apiMaxHandshakesPerHost per address).
// net/http bounds a handshake by ReadHeaderTimeout when it does it itself,
// but not how many run at once: 20,000 connections that never send a byte
// held 20,000 descriptors of the member's process, shared with Raft and
// its log, for 10 s each, and a client reconnecting as fast as it is
// closed held them for good. Accept returns *tls.Conn, so HTTP/2 is still
// negotiated.
func apiListener(tcp net.Listener, cfg *tls.Config, onRefused func(tlsaccept.Reason)) net.Listener {
	return tlsaccept.New(tcp, tlsaccept.Config{
		TLS:                  cfg,
		MaxHandshakes:        apiMaxHandshakes,
		MaxHandshakesPerHost: apiMaxHandshakesPerHost,
		OnRefused:            onRefused,
	})
}

// clientTransport dials other members (forwarding to the leader) with the
// member certificate.
func (m *memberTLS) clientTransport() *http.Transport {
	return client.ConfigureTransport(&http.Transport{TLSClientConfig: trust.ClientConfig(m.ca.Pool(), m.getCert), MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second})
}

// raftTLS is mutual TLS between members only.
func (m *memberTLS) raftTLS() *raftstore.TLSConfig {
	onlyMembers := func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("raft: peer presented no certificate")
		}
		id, err := trust.IdentityOf(cs.PeerCertificates[0])
		if err != nil || id.Kind != "member" {
			return fmt.Errorf("raft: peer %q is not a coordinator member", cs.PeerCertificates[0].Subject.CommonName)
		}
		return nil
	}
	srv := trust.ServerConfig(m.ca.Pool(), m.getCert)
	srv.ClientAuth = tls.RequireAndVerifyClientCert
	srv.VerifyConnection = onlyMembers
	cl := trust.ClientConfig(m.ca.Pool(), m.getCert)
	cl.VerifyConnection = onlyMembers
	return &raftstore.TLSConfig{Server: srv, Client: cl}
}

// bootstrapAdmin creates the first admin token's file on a new
// coordinator, and returns the token record the leader stores while no API
// token exists (coordinator.Config.BootstrapAdmin). An existing file is
// read; a missing one on an existing member means the operator removed it.
func bootstrapAdmin(dataDir string, create bool) (*statemachine.TokenRecord, string, error) {
	path := filepath.Join(dataDir, adminTokenFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrNotExist) && create:
		tok, _ := trust.NewToken(trust.APISecretLen)
		if err := trust.WriteFileAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
			return nil, "", err
		}
		b = []byte(tok)
	case errors.Is(err, os.ErrNotExist):
		return nil, "", nil
	default:
		return nil, "", err
	}
	id, secret, err := trust.ParseToken(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	return &statemachine.TokenRecord{ID: id, Kind: statemachine.TokenKindAPI, SecretHash: trust.HashSecret(secret),
		Role: "admin", Description: "bootstrap admin", CreatedBy: "bootstrap"}, path, nil
}

// fetchMemberCert asks a member of an existing coordinator, verified by
// the CA pin, for this member's certificate, and stores it with the CA it
// answers with. Members forward the request to the leader; it retries
// until one answers, and stops at once on a refused credential.
func fetchMemberCert(ctx context.Context, log *slog.Logger, dataDir, keyFile, addr, pin, token string, req api.JoinRequest, hosts []string) error {
	if pin == "" || token == "" {
		return errors.New("joining needs --ca-pin (sha256:<hex> of the cluster CA's public key) and an admin token (--join-token or --join-token-file)")
	}
	var seenCA *x509.Certificate
	tc, err := trust.PinnedClient(pin, func(c *x509.Certificate) { seenCA = c })
	if err != nil {
		return err
	}
	key, err := trust.NewKey()
	if err != nil {
		return err
	}
	csr, err := trust.NewCSRFor(trust.Identity{Kind: "member", Member: req.ID}, key, hosts)
	if err != nil {
		return err
	}
	req.CSR = string(csr)
	cl := client.New("https://"+addr, &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}})
	cl.SetBearerToken(token)
	var resp api.JoinResponse
	for attempt := 1; ; attempt++ {
		_, err = cl.Do(ctx, http.MethodPost, "/v1/members/certificate", req, &resp)
		if err == nil {
			break
		}
		if p, ok := err.(*api.Problem); ok && (p.Status == http.StatusUnauthorized || p.Status == http.StatusForbidden) {
			return fmt.Errorf("member certificate via %s refused: %w", addr, err)
		}
		log.Warn("member certificate: retrying", "via", addr, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	ca, err := trust.ParseCA([]byte(resp.CA), []byte(resp.CAKey))
	if err != nil {
		return fmt.Errorf("join answer: %w", err)
	}
	if seenCA == nil || ca.Pin() != trust.Pin(seenCA) {
		return errors.New("join answer: the CA sent is not the pinned CA the member served with")
	}
	m := &memberTLS{dir: filepath.Join(dataDir, tlsDirName), ca: ca}
	if err := m.writeCA(); err != nil {
		return err
	}
	keyPEM, err := trust.EncodeKey(key)
	if err != nil {
		return err
	}
	if err := trust.WriteFileAtomic(filepath.Join(m.dir, memberKeyFile), keyPEM, 0o600); err != nil {
		return err
	}
	if err := keepEncryptionKeys(log, keyFile, resp.EncryptionKeys); err != nil {
		return err
	}
	log.Info("member certificate received", "via", addr, "ca_pin", ca.Pin())
	return trust.WriteFileAtomic(filepath.Join(m.dir, memberCertFile), []byte(resp.Certificate), 0o644)
}

// keepEncryptionKeys writes the key file a joining member received, unless
// the operator put one in place already.
func keepEncryptionKeys(log *slog.Logger, path, keys string) error {
	if keys == "" || exists(path) {
		return nil
	}
	r, err := seal.Parse([]byte(keys))
	if err != nil {
		return fmt.Errorf("join answer: encryption keys: %w", err)
	}
	if err := seal.WriteKeyFile(path, r); err != nil {
		return err
	}
	log.Info("encryption key file received", "path", path, "primary", r.Primary())
	return nil
}

// hostsOf lists the hosts a member's certificate must name: those of its
// addresses (an unspecified one, 0.0.0.0, names none), loopback, and the
// extra names given by --tls-san.
func hostsOf(addrs []string, extra string) []string {
	out := []string{"127.0.0.1", "localhost"}
	for _, a := range addrs {
		if h, _, err := net.SplitHostPort(a); err == nil && h != "" {
			if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
				continue
			}
			out = append(out, h)
		}
	}
	for _, h := range strings.Split(extra, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}
