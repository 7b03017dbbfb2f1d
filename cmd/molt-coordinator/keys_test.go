package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/seal"
)

// TestKeyFileAtStart: a bootstrapping member creates its key file 0600;
// a member with none otherwise starts without a key ring; a key file
// others may read is refused; a joining member keeps the key file it
// received unless one is in place.
func TestKeyFileAtStart(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	path := filepath.Join(t.TempDir(), encryptionKeyFile)

	r, err := loadKeyring(log, path, false)
	require.NoError(t, err)
	require.Nil(t, r, "no file and not bootstrapping: no key ring")

	r, err = loadKeyring(log, path, true)
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	again, err := loadKeyring(log, path, true)
	require.NoError(t, err)
	require.Equal(t, r.IDs(), again.IDs(), "an existing file is read, never replaced")

	require.NoError(t, os.Chmod(path, 0o644))
	_, err = loadKeyring(log, path, true)
	require.ErrorIs(t, err, seal.ErrKeyFileMode)

	joined := filepath.Join(t.TempDir(), encryptionKeyFile)
	require.NoError(t, keepEncryptionKeys(log, joined, string(r.Marshal())))
	got, err := seal.LoadKeyFile(joined)
	require.NoError(t, err)
	require.Equal(t, r.IDs(), got.IDs())
	other, err := seal.NewKeyring(seal.GenerateKey())
	require.NoError(t, err)
	require.NoError(t, keepEncryptionKeys(log, joined, string(other.Marshal())))
	got, err = seal.LoadKeyFile(joined)
	require.NoError(t, err)
	require.Equal(t, r.IDs(), got.IDs(), "a key file in place is kept")
	require.ErrorIs(t, keepEncryptionKeys(log, filepath.Join(t.TempDir(), "k"), "garbage"), seal.ErrBadKeyFile)
}
