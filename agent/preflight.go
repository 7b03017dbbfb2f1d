package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// ErrPreflight is wrapped by a failed CheckArtifacts or ProbePeers.
var ErrPreflight = errors.New("preflight check failed")

// checkArtifacts fetches each artifact and checks its sum (and size when
// given), and reports the free disk space. When the check is for an
// upgrade, what it verified is kept in the stage for the upgrade's
// operations (stageKeeps); nothing is installed. Free space is measured
// after that, so the disk-space check judges the room the upgrade has
// left.
func (r *run) checkArtifacts(ctx context.Context) (map[string]string, error) {
	a := r.a
	details := map[string]string{}
	var errs []error
	keep := a.stageKeeps(r.op)
	if keep {
		a.stage.fillFor(r.op.Upgrade)
	}
	for i, art := range r.op.CheckArtifacts.Artifacts {
		name := art.Name
		if name == "" {
			name = strconv.Itoa(i)
		}
		if err := a.verifyArtifact(ctx, art.URL, art.SHA256, art.Size, keep); err != nil {
			details["artifact."+name] = err.Error()
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		details["artifact."+name] = "ok"
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(a.path(a.cfg.DataDir), &st); err == nil {
		details["freeBytes."+a.cfg.DataDir] = strconv.FormatUint(st.Bavail*uint64(st.Bsize), 10)
	}
	if err := syscall.Statfs(filepath.Dir(a.path(a.cfg.KubeletBin)), &st); err == nil {
		details["freeBytes."+filepath.Dir(a.cfg.KubeletBin)] = strconv.FormatUint(st.Bavail*uint64(st.Bsize), 10)
	}
	if len(errs) > 0 {
		return details, fmt.Errorf("%w: %w", ErrPreflight, errors.Join(errs...))
	}
	return details, nil
}

// probePeers dials every address over TCP at once, each bounded by
// ProbeTimeout.
func (r *run) probePeers(ctx context.Context) (map[string]string, error) {
	addrs := r.op.ProbePeers.Addresses
	results := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: r.a.cfg.ProbeTimeout}
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				c.Close()
			}
			results[i] = err
		}()
	}
	wg.Wait()
	details := map[string]string{}
	var errs []error
	for i, addr := range addrs {
		if results[i] != nil {
			details[addr] = results[i].Error()
			errs = append(errs, results[i])
		} else {
			details[addr] = "ok"
		}
	}
	if len(errs) > 0 {
		return details, fmt.Errorf("%w: %d of %d peers unreachable: %w", ErrPreflight, len(errs), len(addrs), errors.Join(errs...))
	}
	return details, nil
}
