package trust

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// KeyPair loads a certificate and key and appends the CA to the chain the
// holder presents, so a peer that knows only the CA's pin can find the CA
// in the handshake and check the pin (see PinnedClient).
func KeyPair(certPEM, keyPEM []byte, ca *x509.Certificate) (tls.Certificate, error) {
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	if ca != nil {
		kp.Certificate = append(kp.Certificate, ca.Raw)
	}
	return kp, nil
}

// LoadKeyPair is KeyPair from files.
func LoadKeyPair(certPath, keyPath string, ca *x509.Certificate) (tls.Certificate, error) {
	c, err := os.ReadFile(certPath)
	if err != nil {
		return tls.Certificate{}, err
	}
	k, err := os.ReadFile(keyPath)
	if err != nil {
		return tls.Certificate{}, err
	}
	return KeyPair(c, k, ca)
}

// ServerConfig is the TLS configuration of a member's REST API and Raft
// listener: it presents the member's certificate and verifies client
// certificates against the CA when a client sends one (agents and other
// members do; operators may use a bearer token instead). getCert is
// called on every handshake so a renewed certificate takes effect
// without a restart.
func ServerConfig(pool *x509.CertPool, getCert func() (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return getCert()
		},
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  pool,
	}
}

// ClientConfig verifies servers against the CA and presents cert (nil: no
// client certificate), read on every handshake.
func ClientConfig(pool *x509.CertPool, getCert func() (*tls.Certificate, error)) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if getCert != nil {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return getCert()
		}
	}
	return c
}

// ErrPinMismatch is returned when no certificate the server presented
// matches the CA pin a client was given.
var ErrPinMismatch = errors.New("the server's CA does not match the CA pin")

// PinnedClient is the TLS configuration of a client that knows only the
// CA's pin (an enrolling agent, a joining member): it accepts the server
// only if the chain it presents contains a CA certificate whose public key
// hashes to pin and the server's leaf certificate verifies against that
// CA. There is no trust on first use. onCA receives the CA certificate once
// found, so the caller can keep it for later connections.
func PinnedClient(pin string, onCA func(*x509.Certificate)) (*tls.Config, error) {
	pin, err := ParsePin(pin)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The standard verification needs roots we do not have yet;
		// VerifyConnection below does all of it against the pinned CA.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("server presented no certificate")
			}
			for _, c := range cs.PeerCertificates[1:] {
				if !c.IsCA || Pin(c) != pin {
					continue
				}
				roots := x509.NewCertPool()
				roots.AddCert(c)
				if err := VerifyServer(cs, roots); err != nil {
					return fmt.Errorf("server certificate does not verify against the pinned CA: %w", err)
				}
				if onCA != nil {
					onCA(c)
				}
				return nil
			}
			return fmt.Errorf("%w %s", ErrPinMismatch, pin)
		},
	}, nil
}

// VerifyServer checks the certificate a server presented in cs against
// roots: its chain (the intermediates it sent), its name, server use.
func VerifyServer(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: cs.ServerName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}
