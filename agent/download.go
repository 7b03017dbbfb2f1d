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

	"github.com/moltproject/molt/api"
)

// Sentinel errors of downloads.
var (
	// ErrChecksumMismatch means a download's sha256 differs from the
	// operation's: the artifact is refused and nothing is installed.
	ErrChecksumMismatch = errors.New("checksum mismatch")
	// ErrDownload means the artifact could not be fetched or stored.
	ErrDownload = errors.New("download failed")
)

// download fetches url into path and checks its sha256 against want. A URL
// that is a path ("/artifacts/v1.34.4/kubelet") names a file the
// coordinator serves from its artifact directory: it is fetched from the
// member the agent talks to now, then from the others, so losing one
// member does not fail the operation. A checksum mismatch is final.
func (a *Agent) download(ctx context.Context, url, want, path string) error {
	if !strings.HasPrefix(url, "/") {
		return a.downloadFrom(ctx, url, want, path)
	}
	bases := []string{a.client.Base()}
	if all, err := api.ParseEndpoints(a.cfg.Coordinator); err == nil {
		for _, b := range all {
			if b != bases[0] {
				bases = append(bases, b)
			}
		}
	}
	var errs []error
	for _, b := range bases {
		err := a.downloadFrom(ctx, b+url, want, path)
		if err == nil || errors.Is(err, ErrChecksumMismatch) || ctx.Err() != nil {
			return err
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// downloadFrom fetches url into the file path (created or truncated), fsyncs
// it and checks its sha256 against want. On any error the file is removed.
func (a *Agent) downloadFrom(ctx context.Context, url, want, path string) (err error) {
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
