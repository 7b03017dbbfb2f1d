package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// Sentinel errors of downloads.
var (
	// ErrChecksumMismatch means a download's sha256 differs from the
	// operation's: the artifact is refused and nothing is installed.
	ErrChecksumMismatch = errors.New("checksum mismatch")
	// ErrDownload means the artifact could not be fetched or stored.
	ErrDownload = errors.New("download failed")
)

// download fetches url into the file path (created or truncated), fsyncs
// it and checks its sha256 against want. On any error the file is removed.
func (a *Agent) download(ctx context.Context, url, want, path string) (err error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.DownloadTimeout)
	defer cancel()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("%w: create %s: %w", ErrDownload, path, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("%w: close %s: %w", ErrDownload, path, cerr)
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrDownload, url, err)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrDownload, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s: HTTP %s", ErrDownload, url, resp.Status)
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), resp.Body); err != nil {
		// ENOSPC lands here; the wrapped error names it.
		return fmt.Errorf("%w: %s to %s: %w", ErrDownload, url, path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: fsync %s: %w", ErrDownload, path, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if !strings.EqualFold(got, want) {
		return fmt.Errorf("%w: %s: want sha256 %s, got %s", ErrChecksumMismatch, url, want, got)
	}
	return nil
}
