package trust

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func TestCARoundTripAndPin(t *testing.T) {
	ca, err := NewCA("molt test", t0)
	require.NoError(t, err)
	again, err := ParseCA(ca.CertPEM, ca.KeyPEM)
	require.NoError(t, err)
	require.Equal(t, ca.Pin(), again.Pin())
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, ca.Pin())
	_, err = ParsePin(strings.ToUpper(ca.Pin()[:7]) + ca.Pin()[7:])
	require.Error(t, err, "the prefix is lower case")
	p, err := ParsePin("sha256:" + strings.ToUpper(ca.Pin()[7:]))
	require.NoError(t, err)
	require.Equal(t, ca.Pin(), p)
	_, err = ParsePin("sha256:abc")
	require.Error(t, err)

	other, err := NewCA("other", t0)
	require.NoError(t, err)
	_, err = ParseCA(ca.CertPEM, other.KeyPEM)
	require.ErrorContains(t, err, "does not match")
}

func TestSignAgentNamesOnlyTheCaller(t *testing.T) {
	ca, _ := NewCA("molt test", t0)
	key, _ := NewKey()
	csr, err := NewCSR(AgentIdentity("lab", "worker-2"), key)
	require.NoError(t, err)
	_, _, err = ca.SignAgent(csr, AgentIdentity("lab", "worker-1"), t0, AgentCertLifetime)
	require.ErrorIs(t, err, ErrCSRIdentity)

	csr, _ = NewCSR(AgentIdentity("lab", "worker-1"), key)
	pemCert, cert, err := ca.SignAgent(csr, AgentIdentity("lab", "worker-1"), t0, AgentCertLifetime)
	require.NoError(t, err)
	require.NotEmpty(t, pemCert)
	id, err := IdentityOf(cert)
	require.NoError(t, err)
	require.Equal(t, AgentIdentity("lab", "worker-1"), id)
	_, err = cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	require.Equal(t, cert.NotBefore.Add(cert.NotAfter.Sub(cert.NotBefore)*2/3), RenewAt(cert), "renewal at two thirds of the lifetime")
	require.WithinDuration(t, t0.Add(20*24*time.Hour), RenewAt(cert), time.Minute)
}

// A client that knows only the pin accepts the server whose chain holds the
// pinned CA and refuses a server from another CA, before sending anything.
func TestPinnedClient(t *testing.T) {
	ca, _ := NewCA("molt test", t0)
	srv := pinnedServer(t, ca)
	var seen *x509.Certificate
	cfg, err := PinnedClient(ca.Pin(), func(c *x509.Certificate) { seen = c })
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.NotNil(t, seen)
	require.Equal(t, ca.Pin(), Pin(seen))

	other, _ := NewCA("other", t0)
	cfg, _ = PinnedClient(other.Pin(), nil)
	_, err = (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Get(srv.URL)
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrPinMismatch) || strings.Contains(err.Error(), ErrPinMismatch.Error()), err)
}

func pinnedServer(t *testing.T, ca *CA) *httptest.Server {
	t.Helper()
	key, _ := NewKey()
	certPEM, err := ca.IssueMember("m1", []string{"127.0.0.1"}, key.Public(), time.Now())
	require.NoError(t, err)
	keyPEM, _ := EncodeKey(key)
	kp, err := KeyPair(certPEM, keyPEM, ca.Cert)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = ServerConfig(ca.Pool(), func() (*tls.Certificate, error) { return &kp, nil })
	// httptest fills Certificates when empty, and TLS prefers them to
	// GetCertificate for a client that sends no server name.
	srv.TLS.Certificates = []tls.Certificate{kp}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestTokens(t *testing.T) {
	tok, id := NewToken(BootstrapSecretLen)
	require.Regexp(t, `^[a-z0-9]{6}\.[a-z0-9]{16}$`, tok)
	gotID, secret, err := ParseToken(tok)
	require.NoError(t, err)
	require.Equal(t, id, gotID)
	require.True(t, SecretMatches(secret, HashSecret(secret)))
	require.False(t, SecretMatches(secret+"x", HashSecret(secret)))
	api, _ := NewToken(APISecretLen)
	_, _, err = ParseToken(api)
	require.NoError(t, err)
	for _, bad := range []string{"", "abcdef", "ABCDEF.0123456789abcdef", "abcdef.0123456789abcde", "abcdef.0123456789abcdef ", "abcdef_0123456789abcdef"} {
		_, _, err := ParseToken(bad)
		require.Error(t, err, bad)
	}
}
