package nspawn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrBoot is wrapped by Boot's errors.
var ErrBoot = errors.New("nspawn: boot host")

// BootConfig says which host to boot.
type BootConfig struct {
	// Name is the machine name (-M); unique among running hosts.
	Name string
	// Rootfs is a tree from EnsureRootfs. It is never written: the host
	// runs on a tmpfs overlay over it.
	Rootfs string
	// NetNS, when set, is a network namespace name under /run/netns that
	// the host joins; empty shares the caller's network.
	NetNS string
	// Binds are extra "--bind=" arguments (SRC[:DST[:OPTS]]).
	Binds []string
	// BindsRO are extra "--bind-ro=" arguments: the same, read-only.
	BindsRO []string
	// Console receives systemd-nspawn's output (boot messages); nil drops it.
	Console io.Writer
	// BootTimeout bounds the wait for systemd to reach running/degraded.
	// Zero means 60s.
	BootTimeout time.Duration
}

// Host is a booted systemd-nspawn container.
type Host struct {
	name string
	cmd  *exec.Cmd
	pid  int // the host's PID 1 as the caller sees it
	done chan struct{}

	stopOnce sync.Once
	stopErr  error
}

// Boot starts a host and waits until its systemd reports the system running
// (or degraded: a failed unit is the test's business, not the boot's).
// ctx bounds only the boot; the host lives until Stop.
func Boot(ctx context.Context, cfg BootConfig) (*Host, error) {
	if cfg.Name == "" || cfg.Rootfs == "" {
		return nil, fmt.Errorf("%w: name and rootfs are required", ErrBoot)
	}
	timeout := cfg.BootTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	args := []string{
		"-D", cfg.Rootfs, "--volatile=overlay", "-b", "--register=no", "--keep-unit",
		"--console=read-only", "-M", cfg.Name, "--capability=all",
	}
	if cfg.NetNS != "" {
		args = append(args, "--network-namespace-path=/run/netns/"+cfg.NetNS)
	}
	for _, b := range cfg.Binds {
		args = append(args, "--bind="+b)
	}
	for _, b := range cfg.BindsRO {
		args = append(args, "--bind-ro="+b)
	}
	cmd := exec.Command("systemd-nspawn", args...)
	// The machine has no seccomp support nspawn could rely on; without
	// this nspawn refuses to start.
	cmd.Env = append(os.Environ(), "SYSTEMD_SECCOMP=0")
	// The last lines of output explain a failed boot.
	tail := &tailBuffer{max: 4096}
	var out io.Writer = tail
	if cfg.Console != nil {
		out = io.MultiWriter(cfg.Console, tail)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBoot, cfg.Name, err)
	}
	h := &Host{name: cfg.Name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(h.done) }()

	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := h.waitRunning(bctx); err != nil {
		_ = h.Stop()
		return nil, fmt.Errorf("%w: %s: %w; output:\n%s", ErrBoot, cfg.Name, err, tail.String())
	}
	return h, nil
}

// waitRunning polls for the container's init and then for
// `systemctl is-system-running` to answer running or degraded.
func (h *Host) waitRunning(ctx context.Context) error {
	last := ""
	for {
		if h.pid == 0 {
			h.pid = InitOf(h.cmd.Process.Pid)
		}
		if h.pid != 0 {
			out, _ := h.Exec(ctx, "systemctl", "is-system-running")
			last = strings.TrimSpace(string(out))
			if last == "running" || last == "degraded" {
				return nil
			}
		}
		select {
		case <-h.done:
			return errors.New("systemd-nspawn exited during boot")
		case <-ctx.Done():
			return fmt.Errorf("system not running (last state %q): %w", last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// InitOf returns the container init under the systemd-nspawn process pid:
// the descendant that is PID 1 of its own PID namespace (NSpid ends in 1),
// or 0 while there is none yet. nspawn first forks a short-lived helper,
// so "the first child" is not enough; the search goes a few levels down.
func InitOf(pid int) int {
	queue := []int{pid}
	for depth := 0; depth < 3 && len(queue) > 0; depth++ {
		var next []int
		for _, p := range queue {
			for _, c := range children(p) {
				if IsNamespaceInit(c) {
					return c
				}
				next = append(next, c)
			}
		}
		queue = next
	}
	return 0
}

func children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(s); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// IsNamespaceInit says whether pid is PID 1 of its own PID namespace.
func IsNamespaceInit(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "NSpid:" {
			return f[len(f)-1] == "1"
		}
	}
	return false
}

// Name returns the machine name.
func (h *Host) Name() string { return h.name }

// PID returns the host's PID 1 as seen from outside.
func (h *Host) PID() int { return h.pid }

// Root returns the outside path of the host's root directory (its overlay
// view), e.g. for reaching its D-Bus socket at Root()+"/run/dbus/system_bus_socket".
func (h *Host) Root() string { return fmt.Sprintf("/proc/%d/root", h.pid) }

// Command returns a command that runs argv inside all of the host's
// namespaces. nsenter enters them before exec, which is safe for any
// binary (unlike nsenter -F with a Go program).
func (h *Host) Command(ctx context.Context, argv ...string) *exec.Cmd {
	args := append([]string{"-t", strconv.Itoa(h.pid), "-a", "--"}, argv...)
	return exec.CommandContext(ctx, "nsenter", args...)
}

// Exec runs argv inside the host and returns its combined output. A non-zero
// exit is an error that includes the output.
func (h *Host) Exec(ctx context.Context, argv ...string) ([]byte, error) {
	var buf bytes.Buffer
	cmd := h.Command(ctx, argv...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return buf.Bytes(), fmt.Errorf("%s on %s: %w: %s", strings.Join(argv, " "), h.name, err, strings.TrimSpace(buf.String()))
	}
	return buf.Bytes(), nil
}

// CopyFile copies the outside file src to dst inside the host with mode,
// creating parent directories. It writes to a temporary name and renames,
// so a process inside never sees a partial file.
func (h *Host) CopyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return h.WriteFile(dst, data, mode)
}

// WriteFile writes data to path inside the host, atomically.
func (h *Host) WriteFile(path string, data []byte, mode os.FileMode) error {
	full := filepath.Join(h.Root(), path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	tmp := full + ".nspawn-tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, full)
}

// Stop powers the host off: SIGTERM asks systemd-nspawn to shut the
// container down cleanly; after 20s it is killed. Safe to call twice.
func (h *Host) Stop() error {
	h.stopOnce.Do(func() {
		select {
		case <-h.done:
			return
		default:
		}
		_ = h.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
			<-h.done
			h.stopErr = fmt.Errorf("nspawn: %s did not stop in 20s; killed", h.name)
		}
	})
	return h.stopErr
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
