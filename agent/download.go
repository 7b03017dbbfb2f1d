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
	return a.fromEachSource(ctx, url, func(ctx context.Context, url string) error {
		return a.downloadFrom(ctx, url, want, path)
	})
}

// verifyArtifact fetches url as download does and checks its sha256
// against want, and its size when size > 0, storing nothing. Preflight
// uses it: every host checks the release at once, and writing (and
// fsyncing) every artifact to disk only to delete it loaded the hosts'
// disks, which a control-plane host shares with etcd, for nothing.
func (a *Agent) verifyArtifact(ctx context.Context, url, want string, size int64) error {
	return a.fromEachSource(ctx, url, func(ctx context.Context, url string) error {
		n, sum, err := a.fetch(ctx, url, io.Discard)
		if err != nil {
			return err
		}
		if size > 0 && n != size {
			return fmt.Errorf("%s: size %d, want %d", url, n, size)
		}
		return checkSum(url, want, sum)
	})
}

// fromEachSource runs get on url, or, for a path URL, on each coordinator
// member's copy of it in turn until one succeeds or the sum mismatches.
func (a *Agent) fromEachSource(ctx context.Context, url string, get func(context.Context, string) error) error {
	if !strings.HasPrefix(url, "/") {
		return get(ctx, url)
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
		err := get(ctx, b+url)
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
	_, sum, err := a.fetch(ctx, url, f)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: fsync %s: %w", ErrDownload, path, err)
	}
	return checkSum(url, want, sum)
}

// fetch GETs url, bounded by DownloadTimeout, into w and returns the
// bytes copied and their sha256 in hex.
func (a *Agent) fetch(ctx context.Context, url string, w io.Writer) (int64, string, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.DownloadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %s: %w", ErrDownload, url, err)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %s: %w", ErrDownload, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, "", fmt.Errorf("%w: %s: HTTP %s", ErrDownload, url, resp.Status)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), resp.Body)
	if err != nil {
		// ENOSPC lands here; the wrapped error names the file.
		return n, "", fmt.Errorf("%w: %s: %w", ErrDownload, url, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// checkSum refuses an artifact whose sha256 got is not want.
func checkSum(url, want, got string) error {
	if !strings.EqualFold(got, want) {
		return fmt.Errorf("%w: %s: want sha256 %s, got %s", ErrChecksumMismatch, url, want, got)
	}
	return nil
}
