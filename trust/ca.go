package trust

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// CALifetime is how long a cluster CA created at bootstrap is valid.
const CALifetime = 10 * 365 * 24 * time.Hour

// CA is the cluster certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertPEM and KeyPEM are the encoded forms written to disk and sent
	// to joining members.
	CertPEM, KeyPEM []byte
}

// NewCA creates a self-signed ECDSA P-256 CA valid from now for CALifetime.
func NewCA(commonName string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"molt"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return nil, err
	}
	return ParseCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM)
}

// ParseCA reads a CA from PEM. The certificate must be a CA and the key
// must match it.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("CA certificate: not a CA (basicConstraints CA:FALSE)")
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, errors.New("CA key does not match the CA certificate")
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// LoadCA reads a CA from a certificate and key file.
func LoadCA(certPath, keyPath string) (*CA, error) {
	c, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	k, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	return ParseCA(c, k)
}

// Pin returns the CA's public-key pin, "sha256:<hex>".
func (ca *CA) Pin() string { return Pin(ca.Cert) }

// Pool returns a cert pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Pin is "sha256:" and the hex SHA-256 of the certificate's
// SubjectPublicKeyInfo: the form kubeadm's --discovery-token-ca-cert-hash
// takes, so `openssl x509 -pubkey | openssl pkey -pubin -outform der |
// sha256sum` computes it too.
func Pin(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ParsePin checks a pin's form and returns it normalised (lower case).
func ParsePin(s string) (string, error) {
	rest, ok := strings.CutPrefix(s, "sha256:")
	if !ok {
		return "", fmt.Errorf("CA pin %q: want sha256:<64 hex digits>", s)
	}
	b, err := hex.DecodeString(rest)
	if err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("CA pin %q: want sha256:<64 hex digits>", s)
	}
	return "sha256:" + hex.EncodeToString(b), nil
}

// ParseCert decodes the first CERTIFICATE block of PEM.
func ParseCert(pemBytes []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, pemBytes = pem.Decode(pemBytes)
		if b == nil {
			return nil, errors.New("no CERTIFICATE PEM block")
		}
		if b.Type == "CERTIFICATE" {
			return x509.ParseCertificate(b.Bytes)
		}
	}
}

// EncodeCert returns a certificate's PEM.
func EncodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// EncodeKey returns a private key as PKCS#8 PEM.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseKey decodes a PKCS#8, EC or PKCS#1 private key PEM.
func ParseKey(pemBytes []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return nil, errors.New("no private key PEM block")
	}
	var k any
	var err error
	switch b.Type {
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", k)
	}
	return s, nil
}

// NewKey makes an ECDSA P-256 key.
func NewKey() (crypto.Signer, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// WriteFileAtomic writes data to path with mode through a temporary file
// and a rename, so a crash leaves the old file or the new one, never half.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func newSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n.Add(n, big.NewInt(1))
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}
