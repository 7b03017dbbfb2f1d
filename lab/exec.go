package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Host is a running lab host, addressed by its init's PID as this machine
// sees it. The lab resolves that PID itself (initOf) rather than trusting
// the booting process, so a Host works from any process.
type Host struct {
	Name string
	// PID is the host's PID 1 seen from outside.
	PID int
}

// Command returns a command that runs argv in all of the host's namespaces.
func (h *Host) Command(ctx context.Context, argv ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(h.PID), "-a", "--"}, argv...)...)
}

// Exec runs argv in the host and returns its combined output.
func (h *Host) Exec(ctx context.Context, argv ...string) ([]byte, error) {
	var buf bytes.Buffer
	cmd := h.Command(ctx, argv...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return buf.Bytes(), fmt.Errorf("%w: %s on %s: %v: %s", ErrHost, strings.Join(argv, " "), h.Name, err, strings.TrimSpace(buf.String()))
	}
	return buf.Bytes(), nil
}

// Root is the outside path of the host's root directory.
func (h *Host) Root() string { return fmt.Sprintf("/proc/%d/root", h.PID) }

// WriteFile writes data to path inside the host through a temporary name
// and a rename, so nothing inside sees a partial file.
func (h *Host) WriteFile(path string, data []byte, mode os.FileMode) error {
	full := filepath.Join(h.Root(), path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrHost, h.Name, err)
	}
	tmp := full + ".lab-tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrHost, h.Name, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrHost, h.Name, err)
	}
	if err := os.Rename(tmp, full); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrHost, h.Name, err)
	}
	return nil
}

// CopyFile copies src on this machine to dst in the host.
func (h *Host) CopyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMissing, err)
	}
	return h.WriteFile(dst, b, mode)
}

// Host returns a running host of the lab.
func (l *Lab) Host(name string) (*Host, error) {
	rh, ok := findHost(name, l.net.HostNS(name))
	if !ok || rh.initPID == 0 {
		return nil, fmt.Errorf("%w: %s is not running", ErrHost, name)
	}
	return &Host{Name: name, PID: rh.initPID}, nil
}

// Exec runs argv inside a running lab host and returns the combined output.
func (l *Lab) Exec(ctx context.Context, host string, argv ...string) ([]byte, error) {
	h, err := l.Host(host)
	if err != nil {
		return nil, err
	}
	return h.Exec(ctx, argv...)
}

// waitHost resolves a freshly booted host's init and waits until its
// systemd reports running or degraded.
func waitHost(ctx context.Context, name, netns string, timeout time.Duration) (*Host, error) {
	var h *Host
	err := poll(ctx, timeout, 100*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		rh, ok := findHost(name, netns)
		if !ok {
			return false, "no systemd-nspawn process", nil
		}
		if rh.initPID == 0 {
			return false, "no init yet", nil
		}
		h = &Host{Name: name, PID: rh.initPID}
		out, _ := h.Exec(ctx, "systemctl", "is-system-running")
		s := strings.TrimSpace(string(out))
		return s == "running" || s == "degraded", "system " + s, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrHost, name, err)
	}
	return h, nil
}
