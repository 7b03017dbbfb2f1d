package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/lab"
)

// Member is one coordinator process. It runs in the lab's network
// namespace: HTTP on the lab bridge's address, Raft on that namespace's
// loopback.
type Member struct {
	ID       string
	HTTPAddr string
	RaftAddr string
	DataDir  string
	LogPath  string

	args []string
	// joinArgs records that --ca-pin and --join-token-file were added.
	joinArgs bool
	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
}

// URL is the member's base URL as agents (inside the lab) see it.
func (m *Member) URL() string { return "https://" + m.HTTPAddr }

// CAFile is the cluster CA certificate the member serves with (the
// first member creates it at bootstrap; the others receive it at join).
func (m *Member) CAFile() string { return filepath.Join(m.DataDir, "tls", "ca.crt") }

// AdminTokenFile is the bootstrap admin token the first member writes.
func (m *Member) AdminTokenFile() string { return filepath.Join(m.DataDir, "admin.token") }

// memberSet builds n members' configuration: member i listens on
// 10.77.0.1:basePort+2i (HTTP) and 127.0.0.1:basePort+2i+1 (Raft). The
// first bootstraps, the others join it.
func memberSet(n, basePort int, workDir string, common []string) []*Member {
	var ms []*Member
	for i := range n {
		id := "c" + strconv.Itoa(i+1)
		m := &Member{
			ID:       id,
			HTTPAddr: lab.GatewayIP + ":" + strconv.Itoa(basePort+2*i),
			RaftAddr: "127.0.0.1:" + strconv.Itoa(basePort+2*i+1),
			DataDir:  filepath.Join(workDir, id),
			LogPath:  filepath.Join(workDir, id+".log"),
		}
		m.args = append([]string{"--node-id", id, "--data-dir", m.DataDir, "--http-addr", m.HTTPAddr, "--raft-addr", m.RaftAddr}, common...)
		if i > 0 {
			// --ca-pin and --join-token-file are added once the first
			// member made its CA and admin token (Up).
			m.args = append(m.args, "--join", ms[0].HTTPAddr)
		}
		ms = append(ms, m)
	}
	return ms
}

// start runs the member's process in namespace ns. A member restarted on
// its data directory rejoins with its Raft state (--join is ignored then).
func (m *Member) start(bin, ns string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(m.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	// `ip netns exec` execs the coordinator, so the PID is the member's.
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, bin}, m.args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start member %s: %w", m.ID, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	m.cmd, m.done = cmd, done
	return nil
}

// Running reports whether the member's process is up.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL — a crash, no shutdown path — and waits for the exit.
func (m *Member) Kill() { m.stop(os.Kill) }

// Stop asks the member to shut down (SIGTERM) and waits.
func (m *Member) Stop() { m.stop(os.Interrupt) }

func (m *Member) stop(sig os.Signal) {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// waitReady polls the member's /readyz (it answers once the member knows a
// leader) until it is 200 or ctx ends.
func (m *Member) waitReady(ctx context.Context, hc *http.Client) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.URL()+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !m.Running() {
			return fmt.Errorf("member %s exited (log %s)", m.ID, m.LogPath)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("member %s not ready: %w", m.ID, ctx.Err())
		case <-t.C:
		}
	}
}

// leader asks the running members who leads and returns it.
func leader(ctx context.Context, hc *http.Client, token string, ms []*Member) (*Member, error) {
	for _, m := range ms {
		if !m.Running() {
			continue
		}
		var list []api.Member
		c := client.New(m.URL(), hc)
		c.SetBearerToken(token)
		if _, err := c.Do(ctx, http.MethodGet, "/v1/members", nil, &list); err != nil {
			continue
		}
		for _, x := range list {
			if !x.Leader {
				continue
			}
			for _, mm := range ms {
				if mm.ID == x.ID && mm.Running() {
					return mm, nil
				}
			}
		}
	}
	return nil, errors.New("no running member is leader")
}
