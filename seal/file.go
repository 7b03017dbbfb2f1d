package seal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LoadKeyFile reads a key ring from path, refusing a file that group or
// others may read or write.
func LoadKeyFile(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if mode := st.Mode().Perm(); mode&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o", ErrKeyFileMode, path, mode)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return nil, err
	}
	r, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// WriteKeyFile writes r to path, mode 0600, atomically: a temporary file
// in the same directory, synced, then renamed over path.
func WriteKeyFile(path string, r *Keyring) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(r.Marshal())
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename survives a crash
		d.Close()
	}
	return nil
}

// GenerateKeyFile writes a new key file at path holding one fresh key, and
// returns its ring. An existing file is never overwritten.
func GenerateKeyFile(path string) (*Keyring, error) {
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("seal: %s exists; not overwritten", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	r, err := NewKeyring(GenerateKey())
	if err != nil {
		return nil, err
	}
	return r, WriteKeyFile(path, r)
}

// AddPrimaryKey puts a fresh key first in the key file at path (creating
// the file when missing) and returns the new key's ID: from then on it
// seals, and the keys before it only open.
func AddPrimaryKey(path string) (string, error) {
	old, err := LoadKeyFile(path)
	if errors.Is(err, os.ErrNotExist) {
		r, err := GenerateKeyFile(path)
		if err != nil {
			return "", err
		}
		return r.Primary(), nil
	}
	if err != nil {
		return "", err
	}
	r, err := old.WithPrimary(GenerateKey())
	if err != nil {
		return "", err
	}
	return r.Primary(), WriteKeyFile(path, r)
}
