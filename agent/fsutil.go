package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// writeFileAtomic writes data to a temp file in path's directory, fsyncs
// it, renames it over path and fsyncs the directory: after a crash path
// holds either the old or the new content, never a mix.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	return replaceFile(path, mode, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// replaceFile fills a hidden temp file beside path with fill, sets mode,
// fsyncs it, renames it over path and fsyncs the directory. A leading dot:
// the kubelet ignores hidden files in the manifest dir, so it never sees
// the partial temp file.
func replaceFile(path string, mode os.FileMode, fill func(*os.File) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".molt-tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	werr := fill(f)
	if werr == nil {
		werr = f.Chmod(mode)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return werr
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename or unlink in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// fileSHA256 returns the hex sha256 of a file; "" when it does not exist.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyFileAtomic copies src to dst through a synced temp file and rename.
func copyFileAtomic(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	return replaceFile(dst, fi.Mode().Perm(), func(f *os.File) error {
		_, err := io.Copy(f, in)
		return err
	})
}
