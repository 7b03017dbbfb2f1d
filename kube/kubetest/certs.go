package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the files the control plane is started with.
type pki struct {
	caPEM      []byte // trust anchor for clients
	serverCert string // kube-apiserver serving cert (127.0.0.1, localhost)
	serverKey  string
	saKey      string // service-account signing key (private; also verifies)
	tokenFile  string // static token file with one system:masters user
	token      string
}

// newPKI writes a throwaway CA, a serving certificate and keys into dir.
// ECDSA P-256 keeps generation instant. Validity uses the wall clock: these
// certificates are checked by real processes against real time.
func newPKI(dir string) (*pki, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubetest-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	p := &pki{
		caPEM:      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		serverCert: filepath.Join(dir, "apiserver.crt"),
		serverKey:  filepath.Join(dir, "apiserver.key"),
		saKey:      filepath.Join(dir, "sa.key"),
		tokenFile:  filepath.Join(dir, "tokens.csv"),
		token:      hex.EncodeToString(tok),
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return nil, err
	}
	saKeyDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		p.serverCert: append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}), p.caPEM...),
		p.serverKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: srvKeyDER}),
		p.saKey:      pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saKeyDER}),
		// token,user,uid,"groups": system:masters bypasses authorization.
		p.tokenFile: fmt.Appendf(nil, "%s,kubetest-admin,kubetest-admin,\"system:masters\"\n", p.token),
	}
	for name, data := range files {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}
