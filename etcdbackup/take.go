package etcdbackup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Meta describes one snapshot: what the coordinator records and
// `moltctl backup list` shows.
type Meta struct {
	// Member is the endpoint of the member the snapshot was taken from.
	Member string `json:"member"`
	// Revision is the etcd store revision the snapshot holds at least: the
	// member's revision checked just before the stream (or the stream
	// header's, where the member fills it in).
	Revision int64 `json:"revision"`
	// Size is the snapshot's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex sha256 of the snapshot's bytes, as written.
	SHA256 string `json:"sha256"`
	// EtcdVersion is the version of the member that produced it (etcd ≥ 3.6
	// reports it with the snapshot; before, the member's status just
	// before it says it): the etcdutl to restore it with.
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// TakenAt is when the snapshot was taken (the caller's clock).
	TakenAt time.Time `json:"takenAt"`
}

// defaultStatusTimeout bounds one member's status check when the config
// names no DialTimeout.
const defaultStatusTimeout = 5 * time.Second

// ErrNoHealthyMember is returned when no endpoint answered a status request
// without errors: there was nothing to take a snapshot from.
var ErrNoHealthyMember = errors.New("etcdbackup: no healthy etcd member")

// Take writes a snapshot of the etcd cluster to w, from the first of
// cfg.Endpoints that reports itself healthy (answers Status with no errors
// and knows a leader), and returns its description. Endpoints are tried one
// at a time with a client of their own, so the snapshot comes from the
// member that was checked, not from one the balancer picks. now stamps
// TakenAt. On error, w may hold a partial snapshot the caller must discard.
func Take(ctx context.Context, cfg clientv3.Config, w io.Writer, now time.Time) (Meta, error) {
	var errs []error
	for _, ep := range cfg.Endpoints {
		one := cfg
		one.Endpoints = []string{ep}
		if one.Logger == nil {
			one.Logger = zap.NewNop()
		}
		cli, err := clientv3.New(one)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			continue
		}
		rev, version, err := healthy(ctx, cli, ep, cfg.DialTimeout)
		if err != nil {
			cli.Close()
			errs = append(errs, err)
			continue
		}
		m, err := save(ctx, cli, ep, w, rev, version)
		cli.Close()
		if err != nil {
			// A stream broken half way has written to w: trying the next
			// member would append to it. The caller retries from scratch.
			return Meta{}, err
		}
		m.TakenAt = now
		return m, nil
	}
	return Meta{}, fmt.Errorf("%w: %w", ErrNoHealthyMember, errors.Join(errs...))
}

// healthy asks the member for its status: it must answer, report no
// errors (an alarm such as NOSPACE, a corrupt store) and know a leader.
// A dead endpoint makes the call wait for a connection until its context
// ends, so each member gets timeout (the config's DialTimeout, else
// defaultStatusTimeout) rather than the caller's whole deadline.
// It returns the member's store revision and its etcd version.
func healthy(ctx context.Context, cli *clientv3.Client, ep string, timeout time.Duration) (int64, string, error) {
	if timeout <= 0 {
		timeout = defaultStatusTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := cli.Status(ctx, ep)
	if err != nil {
		return 0, "", fmt.Errorf("%s: status: %w", ep, err)
	}
	if len(st.Errors) > 0 {
		return 0, "", fmt.Errorf("%s: member reports errors: %v", ep, st.Errors)
	}
	if st.Leader == 0 {
		return 0, "", fmt.Errorf("%s: member has no leader", ep)
	}
	return st.Header.Revision, st.Version, nil
}

// save streams the snapshot. etcd 3.6 leaves the stream header's revision
// at 0, so rev (the member's revision from the status check just before)
// stands in: the snapshot holds at least that revision. etcd 3.5 sends no
// version with the snapshot, so the status's (version) stands in.
func save(ctx context.Context, cli *clientv3.Client, ep string, w io.Writer, rev int64, version string) (Meta, error) {
	resp, err := cli.SnapshotWithVersion(ctx)
	if err != nil {
		return Meta{}, fmt.Errorf("%s: snapshot: %w", ep, err)
	}
	defer resp.Snapshot.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), resp.Snapshot)
	if err != nil {
		return Meta{}, fmt.Errorf("%s: snapshot stream after %d bytes: %w", ep, n, err)
	}
	m := Meta{Member: ep, Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), EtcdVersion: resp.Version}
	if m.EtcdVersion == "" {
		m.EtcdVersion = version
	}
	m.Revision = rev
	if resp.Header != nil && resp.Header.Revision > rev {
		m.Revision = resp.Header.Revision
	}
	return m, nil
}
