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
// given), storing nothing (verifyArtifact), and reports the free disk
// space. Nothing is installed.
func (r *run) checkArtifacts(ctx context.Context) (map[string]string, error) {
	a := r.a
	details := map[string]string{}
	var errs []error
	for i, art := range r.op.CheckArtifacts.Artifacts {
		name := art.Name
		if name == "" {
			name = strconv.Itoa(i)
		}
		if err := a.verifyArtifact(ctx, art.URL, art.SHA256, art.Size); err != nil {
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
