package kubetest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// stopGrace is how long a process gets to exit after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// process is one started binary whose output goes to a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has been reaped
	err  error         // Wait's result, valid after done
}

// startProcess starts bin with args, logging to dir/name.log. Pdeathsig makes
// the kernel kill it if the test binary dies without running cleanups.
func startProcess(dir, name, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL after stopGrace, and reaps the process.
func (p *process) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// logTail returns the last few KiB of the process log for error messages.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	const max = 4096
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. The listeners
// are held until all ports are chosen so the kernel does not hand out the
// same port twice; another process could still take one before the
// component binds it, which startup reports as an error.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
