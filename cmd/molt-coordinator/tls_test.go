package main

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/trust"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func leaf(t *testing.T, m *memberTLS) *x509.Certificate {
	t.Helper()
	c, err := m.getCert()
	require.NoError(t, err)
	l, err := x509.ParseCertificate(c.Certificate[0])
	require.NoError(t, err)
	return l
}

// A bootstrapping member makes its CA and certificate once; a restart
// loads the same; files holding keys are the owner's alone.
func TestBootstrapTLSOnceThenLoad(t *testing.T) {
	dir := t.TempDir()
	hosts := hostsOf([]string{"10.0.0.5:7080", "0.0.0.0:7081"}, "coord.example, 10.0.0.9")
	require.Equal(t, []string{"127.0.0.1", "localhost", "10.0.0.5", "coord.example", "10.0.0.9"}, hosts)
	m, err := bootstrapTLS(dir, "", "", "c1", hosts, now)
	require.NoError(t, err)
	for _, f := range []string{caKeyFile, memberKeyFile} {
		st, err := os.Stat(filepath.Join(dir, tlsDirName, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), f)
	}
	l := leaf(t, m)
	require.NoError(t, l.VerifyHostname("coord.example"))
	require.NoError(t, l.VerifyHostname("10.0.0.5"))
	id, err := trust.IdentityOf(l)
	require.NoError(t, err)
	require.Equal(t, "c1", id.Member)

	again, err := loadTLS(dir, "c1", hosts, now.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, m.ca.Pin(), again.ca.Pin())
	require.Equal(t, l.SerialNumber, leaf(t, again).SerialNumber, "a valid certificate is kept")
}

// A crash between writing a new key and its certificate leaves a pair that
// does not match: the next start issues a new certificate and serves.
// So does a certificate close to expiry or missing a new address.
func TestMemberCertificateReissued(t *testing.T) {
	dir := t.TempDir()
	hosts := hostsOf([]string{"10.0.0.5:7080"}, "")
	m, err := bootstrapTLS(dir, "", "", "c1", hosts, now)
	require.NoError(t, err)
	first := leaf(t, m).SerialNumber

	other, _ := trust.NewKey()
	pemKey, _ := trust.EncodeKey(other)
	require.NoError(t, os.WriteFile(filepath.Join(dir, tlsDirName, memberKeyFile), pemKey, 0o600))
	m2, err := loadTLS(dir, "c1", hosts, now)
	require.NoError(t, err)
	require.NotEqual(t, first, leaf(t, m2).SerialNumber, "mismatched pair replaced")

	m3, err := loadTLS(dir, "c1", hosts, now.Add(trust.MemberCertLifetime-10*24*time.Hour))
	require.NoError(t, err)
	require.NotEqual(t, leaf(t, m2).SerialNumber, leaf(t, m3).SerialNumber, "renewed within a month of expiry")

	m4, err := loadTLS(dir, "c1", hostsOf([]string{"10.0.0.6:7080"}, ""), now)
	require.NoError(t, err)
	require.NoError(t, leaf(t, m4).VerifyHostname("10.0.0.6"), "reissued for a new address")
}

// --ca-cert/--ca-key bring an operator's CA; they go together.
func TestBootstrapWithGivenCA(t *testing.T) {
	ca, err := trust.NewCA("site CA", now)
	require.NoError(t, err)
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "ca.crt"), ca.CertPEM, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(src, "ca.key"), ca.KeyPEM, 0o600))
	_, err = bootstrapTLS(t.TempDir(), filepath.Join(src, "ca.crt"), "", "c1", nil, now)
	require.ErrorContains(t, err, "go together")
	m, err := bootstrapTLS(t.TempDir(), filepath.Join(src, "ca.crt"), filepath.Join(src, "ca.key"), "c1", nil, now)
	require.NoError(t, err)
	require.Equal(t, ca.Pin(), m.ca.Pin())
}

// The bootstrap admin token is made once, 0600, and read back on restart;
// removing the file stops the leader from storing it again.
func TestBootstrapAdminToken(t *testing.T) {
	dir := t.TempDir()
	rec, path, err := bootstrapAdmin(dir, true)
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	b, _ := os.ReadFile(path)
	id, secret, err := trust.ParseToken(string(b[:len(b)-1]))
	require.NoError(t, err)
	require.Equal(t, id, rec.ID)
	require.True(t, trust.SecretMatches(secret, rec.SecretHash))
	require.Equal(t, "admin", rec.Role)

	again, _, err := bootstrapAdmin(dir, false)
	require.NoError(t, err)
	require.Equal(t, rec, again)
	require.NoError(t, os.Remove(path))
	none, _, err := bootstrapAdmin(dir, false)
	require.NoError(t, err)
	require.Nil(t, none)
}
