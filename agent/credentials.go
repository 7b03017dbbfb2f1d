package agent

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/moltproject/molt/trust"
)

// The agent's credentials: the cluster CA it trusts the coordinator by and
// the client certificate that names its node, kubeadm-style. A new host
// has neither: it enrolls with a bootstrap token and the CA's pin
// (enroll.go), then renews its certificate at two thirds of its lifetime.
//
// On disk, under <DataDir>/tls/:
//   - ca.crt: the cluster CA, whose pin matched;
//   - agent.pem: the certificate and its key in one file (0600), so a
//     renewal replaces the pair with one rename and a crash never pairs a
//     certificate with the wrong key (kubelet keeps its client
//     certificate the same way);
//   - pending.key: the key of a CSR in flight (0600); a crash leaves it
//     behind and the next attempt makes a new one.
const (
	caFileName      = "ca.crt"
	pairFileName    = "agent.pem"
	pendingFileName = "pending.key"
)

// credentials holds what the agent's TLS connections use; swapped whole on
// renewal, read on every handshake.
type credentials struct {
	dir  string
	pool atomic.Pointer[x509.CertPool]
	ca   atomic.Pointer[x509.Certificate]
	pair atomic.Pointer[tls.Certificate]
	leaf atomic.Pointer[x509.Certificate]
	sys  *x509.CertPool
}

func newCredentials(dir string) *credentials {
	c := &credentials{dir: dir}
	c.sys, _ = x509.SystemCertPool()
	return c
}

// load reads stored credentials; ok is false when there are none usable at
// now (missing, unreadable, expired, or naming another node).
func (c *credentials) load(id trust.Identity, now time.Time) (bool, error) {
	caPEM, err1 := os.ReadFile(filepath.Join(c.dir, caFileName))
	pairPEM, err2 := os.ReadFile(filepath.Join(c.dir, pairFileName))
	if errors.Is(err1, os.ErrNotExist) || errors.Is(err2, os.ErrNotExist) {
		return false, nil
	}
	if err1 != nil || err2 != nil {
		return false, errors.Join(err1, err2)
	}
	ca, err := trust.ParseCert(caPEM)
	if err != nil {
		return false, fmt.Errorf("%s: %w", caFileName, err)
	}
	certPEM, keyPEM := splitPEM(pairPEM)
	kp, leaf, err := checkPair(certPEM, keyPEM, ca, id)
	if err != nil {
		return false, fmt.Errorf("%s: %w", pairFileName, err)
	}
	if !now.Before(leaf.NotAfter) {
		return false, nil
	}
	c.install(ca, kp, leaf)
	return true, nil
}

// store writes a new pair (and the CA) and starts using them.
func (c *credentials) store(caPEM, certPEM, keyPEM []byte, id trust.Identity) error {
	ca, err := trust.ParseCert(caPEM)
	if err != nil {
		return fmt.Errorf("CA: %w", err)
	}
	kp, leaf, err := checkPair(certPEM, keyPEM, ca, id)
	if err != nil {
		return err
	}
	if err := trust.WriteFileAtomic(filepath.Join(c.dir, caFileName), caPEM, 0o644); err != nil {
		return err
	}
	pair := append(append([]byte{}, certPEM...), keyPEM...)
	if err := trust.WriteFileAtomic(filepath.Join(c.dir, pairFileName), pair, 0o600); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(c.dir, pendingFileName))
	c.install(ca, kp, leaf)
	return nil
}

func (c *credentials) install(ca *x509.Certificate, kp tls.Certificate, leaf *x509.Certificate) {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	c.ca.Store(ca)
	c.pool.Store(pool)
	c.pair.Store(&kp)
	c.leaf.Store(leaf)
}

// newKey makes the key of the next CSR and writes it, 0600, before the CSR
// leaves the host.
func (c *credentials) newKey() (key any, keyPEM []byte, err error) {
	k, err := trust.NewKey()
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = trust.EncodeKey(k)
	if err != nil {
		return nil, nil, err
	}
	if err := trust.WriteFileAtomic(filepath.Join(c.dir, pendingFileName), keyPEM, 0o600); err != nil {
		return nil, nil, err
	}
	return k, keyPEM, nil
}

// checkPair parses a certificate and key, and checks they match, that the
// CA signed the certificate for client use and that it names id.
func checkPair(certPEM, keyPEM []byte, ca *x509.Certificate, id trust.Identity) (tls.Certificate, *x509.Certificate, error) {
	kp, err := trust.KeyPair(certPEM, keyPEM, ca)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: leaf.NotBefore.Add(time.Minute), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certificate not signed by the CA: %w", err)
	}
	got, err := trust.IdentityOf(leaf)
	if err != nil || got != id {
		return tls.Certificate{}, nil, fmt.Errorf("certificate names %q, want %q", leaf.Subject.CommonName, id.String())
	}
	return kp, leaf, nil
}

// splitPEM separates the CERTIFICATE blocks from the key block.
func splitPEM(b []byte) (certPEM, keyPEM []byte) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return certPEM, keyPEM
		}
		enc := pem.EncodeToMemory(blk)
		if blk.Type == "CERTIFICATE" {
			certPEM = append(certPEM, enc...)
		} else {
			keyPEM = append(keyPEM, enc...)
		}
	}
}

// clientTLS is the TLS configuration of every connection the agent opens:
// the server must verify against the cluster CA (or, for artifact URLs
// outside the coordinator, the system's roots), and the agent presents its
// current certificate when asked. Both are read at each handshake, so a
// renewal needs no new clients.
func (c *credentials) clientTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is VerifyConnection's, against roots that change
		// when the agent enrolls.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			err := errors.New("the agent has no CA yet (not enrolled)")
			if pool := c.pool.Load(); pool != nil {
				if err = trust.VerifyServer(cs, pool); err == nil {
					return nil
				}
			}
			if c.sys != nil && trust.VerifyServer(cs, c.sys) == nil {
				return nil
			}
			return fmt.Errorf("server certificate: %w", err)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if p := c.pair.Load(); p != nil {
				return p, nil
			}
			return &tls.Certificate{}, nil
		},
	}
}

// transport is an HTTP transport using clientTLS.
func (c *credentials) transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = c.clientTLS()
	return tr
}

// renewingTransport sends each request over its current transport. renew
// starts a new one: requests after a certificate renewal open connections
// that present the new certificate, while a request in flight (a long
// poll) finishes on the old transport, whose connections close once idle.
// Closing idle connections alone is not enough over HTTP/2, where the one
// connection to a member carries the long poll and is hardly ever idle.
type renewingTransport struct {
	cur  atomic.Pointer[http.Transport]
	make func() *http.Transport
}

func newRenewingTransport(mk func() *http.Transport) *renewingTransport {
	t := &renewingTransport{make: mk}
	t.cur.Store(mk())
	return t
}

func (t *renewingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.cur.Load().RoundTrip(r)
}

// renew switches to a new transport and closes the old one's idle
// connections.
func (t *renewingTransport) renew() { t.cur.Swap(t.make()).CloseIdleConnections() }

// CloseIdleConnections closes the current transport's idle connections.
func (t *renewingTransport) CloseIdleConnections() { t.cur.Load().CloseIdleConnections() }
