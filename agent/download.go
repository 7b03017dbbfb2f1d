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

	"github.com/moltproject/molt/api/client"
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
// against want, and its size when size > 0. With keep, the artifact is
// written to the stage as it streams and kept there once verified (see
// stage.go); without it, or when the stage does not take it, nothing is
// stored: every host checks the release at once, and writing (and
// fsyncing) an artifact only to delete it loads the hosts' disks, which a
// control-plane host shares with etcd, for nothing.
func (a *Agent) verifyArtifact(ctx context.Context, url, want string, size int64, keep bool) error {
	return a.fromEachSource(ctx, url, func(ctx context.Context, url string) error {
		var kept *stageWrite
		n, sum, err := a.fetch(ctx, url, func(length int64) io.Writer {
			if size > 0 {
				length = size
			}
			if keep {
				kept = a.stage.begin(strings.ToLower(want), length)
			}
			if kept == nil {
				return io.Discard
			}
			return kept
		})
		if err == nil && size > 0 && n != size {
			err = fmt.Errorf("%s: size %d, want %d", url, n, size)
		}
		if err == nil {
			err = checkSum(url, want, sum)
		}
		if kept != nil {
			kept.finish(err == nil)
		}
		return err
	})
}

// obtain puts the artifact at url, whose sha256 is want, into the file
// path (created or truncated, fsynced): from the stage when it holds the
// artifact and its bytes still hash to want, else downloaded as download
// does. Every operation that needs a release artifact gets it here, so
// only what the stage lacks is fetched.
func (a *Agent) obtain(ctx context.Context, url, want, path string) error {
	sum := strings.ToLower(want)
	if n, ok := a.stage.copyTo(sum, path); ok {
		a.metrics.ArtifactBytes(SourceStage, n)
		a.log.Info("artifact taken from the stage", "url", url, "sha256", sum, "bytes", n)
		return nil
	}
	return a.download(ctx, url, want, path)
}

// fromEachSource runs get on url, or, for a path URL, on each coordinator
// member's copy of it in turn until one succeeds or the sum mismatches.
func (a *Agent) fromEachSource(ctx context.Context, url string, get func(context.Context, string) error) error {
	if !strings.HasPrefix(url, "/") {
		return get(ctx, url)
	}
	bases := []string{a.client.Base()}
	if all, err := client.ParseEndpoints(a.cfg.Coordinator); err == nil {
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
	_, sum, err := a.fetch(ctx, url, func(int64) io.Writer { return f })
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: fsync %s: %w", ErrDownload, path, err)
	}
	return checkSum(url, want, sum)
}

// fetch GETs url, bounded by DownloadTimeout, into the writer open
// returns, which is told the body's announced length first (-1: unknown),
// and returns the bytes copied and their sha256 in hex. The bytes count
// as fetched from the network whether or not the copy completes.
func (a *Agent) fetch(ctx context.Context, url string, open func(length int64) io.Writer) (int64, string, error) {
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
	n, err := io.Copy(io.MultiWriter(open(resp.ContentLength), h), resp.Body)
	if n > 0 {
		a.metrics.ArtifactBytes(SourceNetwork, n)
	}
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
