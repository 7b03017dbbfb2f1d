package seal_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/seal"
)

func ring(t *testing.T, keys ...seal.Key) *seal.Keyring {
	t.Helper()
	r, err := seal.NewKeyring(keys...)
	require.NoError(t, err)
	return r
}

func TestSealOpenRoundTrip(t *testing.T) {
	r := ring(t, seal.GenerateKey())
	for _, pt := range []string{"", "apiVersion: v1\nkind: Config\n", strings.Repeat("x", 1<<16)} {
		s := r.Seal([]byte(pt), "kubeconfig/lab")
		require.True(t, seal.IsSealed(s))
		require.True(t, strings.HasPrefix(s, seal.Prefix+r.Primary()+":"), s)
		require.NotContains(t, s, "\n", "an envelope is one line")
		got, err := r.Open(s, "kubeconfig/lab")
		require.NoError(t, err)
		require.Equal(t, pt, string(got))
	}
	a, b := r.Seal([]byte("same"), "p"), r.Seal([]byte("same"), "p")
	require.NotEqual(t, a, b, "every seal has its own nonce")
}

func TestOpenRefusesTamperingAndOtherPurposes(t *testing.T) {
	r := ring(t, seal.Key{ID: "a", Secret: make([]byte, 32)}, seal.Key{ID: "b", Secret: []byte(strings.Repeat("b", 32))})
	s := r.Seal([]byte("secret"), "kubeconfig/lab")
	id, body, _ := strings.Cut(strings.TrimPrefix(s, seal.Prefix), ":")
	raw, err := base64.RawURLEncoding.DecodeString(body)
	require.NoError(t, err)
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)-1] ^= 1

	for name, tc := range map[string]struct {
		sealed, purpose string
		err             error
	}{
		"flipped bit":     {seal.Prefix + id + ":" + base64.RawURLEncoding.EncodeToString(flipped), "kubeconfig/lab", seal.ErrTampered},
		"truncated":       {seal.Prefix + id + ":" + base64.RawURLEncoding.EncodeToString(raw[:10]), "kubeconfig/lab", seal.ErrTampered},
		"not base64":      {seal.Prefix + id + ":%%%", "kubeconfig/lab", seal.ErrTampered},
		"other cluster":   {s, "kubeconfig/edge", seal.ErrTampered},
		"relabelled key":  {seal.Prefix + "b:" + body, "kubeconfig/lab", seal.ErrTampered},
		"unknown key":     {seal.Prefix + "zz:" + body, "kubeconfig/lab", seal.ErrUnknownKey},
		"plain text":      {"apiVersion: v1", "kubeconfig/lab", seal.ErrNotSealed},
		"other version":   {"molt-sealed:v2:a:" + body, "kubeconfig/lab", seal.ErrNotSealed},
		"no key id":       {seal.Prefix + body, "kubeconfig/lab", seal.ErrNotSealed},
		"bad key id char": {seal.Prefix + "a/b:" + body, "kubeconfig/lab", seal.ErrNotSealed},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := r.Open(tc.sealed, tc.purpose)
			require.ErrorIs(t, err, tc.err)
		})
	}
	got, err := r.Open(s, "kubeconfig/lab")
	require.NoError(t, err)
	require.Equal(t, "secret", string(got))
}

func TestKeyringRefusesBadKeys(t *testing.T) {
	_, err := seal.NewKeyring()
	require.ErrorIs(t, err, seal.ErrBadKeyFile)
	_, err = seal.NewKeyring(seal.Key{ID: "a", Secret: make([]byte, 16)})
	require.ErrorIs(t, err, seal.ErrBadKeyLength)
	_, err = seal.NewKeyring(seal.Key{ID: "a:b", Secret: make([]byte, 32)})
	require.ErrorIs(t, err, seal.ErrBadKeyID)
	_, err = seal.NewKeyring(seal.Key{ID: "a", Secret: make([]byte, 32)}, seal.Key{ID: "a", Secret: make([]byte, 32)})
	require.ErrorIs(t, err, seal.ErrBadKeyFile)

	for name, file := range map[string]string{
		"three fields": "a AAAA extra\n",
		"not base64":   "a !!!\n",
		"empty":        "# nothing\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := seal.Parse([]byte(file))
			require.ErrorIs(t, err, seal.ErrBadKeyFile)
		})
	}
	_, err = seal.Parse([]byte("a " + base64.StdEncoding.EncodeToString(make([]byte, 31)) + "\n"))
	require.ErrorIs(t, err, seal.ErrBadKeyLength)
}

// TestRotation: a new primary seals, the old key still opens what it
// sealed until it is removed; then only what was re-sealed opens.
func TestRotation(t *testing.T) {
	old := ring(t, seal.GenerateKey())
	before := old.Seal([]byte("kc"), "kubeconfig/lab")

	rotated, err := old.WithPrimary(seal.GenerateKey())
	require.NoError(t, err)
	require.NotEqual(t, old.Primary(), rotated.Primary())
	require.Equal(t, []string{rotated.Primary(), old.Primary()}, rotated.IDs())
	pt, err := rotated.Open(before, "kubeconfig/lab")
	require.NoError(t, err)
	after := rotated.Seal(pt, "kubeconfig/lab")
	id, err := seal.KeyID(after)
	require.NoError(t, err)
	require.Equal(t, rotated.Primary(), id)

	pruned, err := rotated.Without(old.Primary())
	require.NoError(t, err)
	_, err = pruned.Open(before, "kubeconfig/lab")
	require.ErrorIs(t, err, seal.ErrUnknownKey)
	got, err := pruned.Open(after, "kubeconfig/lab")
	require.NoError(t, err)
	require.Equal(t, "kc", string(got))
}

func TestKeyFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "encryption.key")
	r, err := seal.GenerateKeyFile(path)
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	_, err = seal.GenerateKeyFile(path)
	require.Error(t, err, "an existing key file is never overwritten")

	loaded, err := seal.LoadKeyFile(path)
	require.NoError(t, err)
	require.Equal(t, r.IDs(), loaded.IDs())
	s := r.Seal([]byte("x"), "p")
	_, err = loaded.Open(s, "p")
	require.NoError(t, err)

	id, err := seal.AddPrimaryKey(path)
	require.NoError(t, err)
	loaded, err = seal.LoadKeyFile(path)
	require.NoError(t, err)
	require.Equal(t, []string{id, r.Primary()}, loaded.IDs())
	_, err = loaded.Open(s, "p")
	require.NoError(t, err, "the old key still opens")

	for _, mode := range []os.FileMode{0o640, 0o604, 0o660} {
		require.NoError(t, os.Chmod(path, mode))
		_, err = seal.LoadKeyFile(path)
		require.ErrorIs(t, err, seal.ErrKeyFileMode, "mode %04o", mode)
	}
	require.NoError(t, os.Chmod(path, 0o400))
	_, err = seal.LoadKeyFile(path)
	require.NoError(t, err, "read-only for the owner is fine")

	fresh := filepath.Join(t.TempDir(), "new.key")
	id, err = seal.AddPrimaryKey(fresh)
	require.NoError(t, err)
	loaded, err = seal.LoadKeyFile(fresh)
	require.NoError(t, err)
	require.Equal(t, []string{id}, loaded.IDs())
}
