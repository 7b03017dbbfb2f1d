//go:build linearizability

package linearizability

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/trust"
)

// member is one molt-coordinator process in its own namespace.
type member struct {
	i       int
	id      string
	dataDir string
	logPath string
	args    []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	frozen bool
}

func (m *member) httpAddr() string { return memberIP(m.i) + ":7080" }

// start runs the member in its namespace (`ip netns exec` execs it, so the
// PID is the member's).
func (m *member) start(bin string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command("ip", append([]string{"netns", "exec", memberNS(m.i), bin}, m.args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	m.cmd, m.done, m.frozen = cmd, done, false
	return nil
}

// kill sends SIGKILL (after SIGCONT, should it be frozen) and waits.
func (m *member) kill() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

func (m *member) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

// signal sends SIGSTOP (freeze) or SIGCONT (thaw).
func (m *member) signal(sig syscall.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return fmt.Errorf("member %s is not running", m.id)
	}
	m.frozen = sig == syscall.SIGSTOP
	return m.cmd.Process.Signal(sig)
}

// coordinator is the three members and what clients need to reach them.
type coordinator struct {
	t       *testing.T
	bin     string
	members []*member
	caPool  *x509.CertPool
	token   string
	hc      *http.Client // admin calls (httpClient)
}

// buildCoordinator builds molt-coordinator into the test's directory, or
// takes MOLT_COORDINATOR_BIN.
func buildCoordinator(t *testing.T) string {
	if b := os.Getenv("MOLT_COORDINATOR_BIN"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "molt-coordinator")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/moltproject/molt/cmd/molt-coordinator")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build molt-coordinator: %v\n%s", err, out)
	}
	return bin
}

// startCoordinator starts n members: the first bootstraps, the others join
// it with its CA pin and admin token.
func startCoordinator(t *testing.T, bin string, n int, workDir string) *coordinator {
	c := &coordinator{t: t, bin: bin}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("m%d", i)
		m := &member{i: i, id: id, dataDir: filepath.Join(workDir, id), logPath: filepath.Join(workDir, id+".log")}
		m.args = []string{"--node-id", id, "--data-dir", m.dataDir, "--http-addr", m.httpAddr(),
			"--raft-addr", memberIP(i) + ":7081", "--log-level", "warn"}
		c.members = append(c.members, m)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			if m.running() {
				_ = m.signal(syscall.SIGCONT)
			}
			m.kill()
		}
	})
	first := c.members[0]
	if err := first.start(bin); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(first.dataDir, "tls", "ca.crt")
	tokenFile := filepath.Join(first.dataDir, "admin.token")
	waitFor(t, "the first member's CA and admin token", 60*time.Second, func() bool {
		ca, err1 := os.ReadFile(caFile)
		tok, err2 := os.ReadFile(tokenFile)
		if err1 != nil || err2 != nil || len(tok) == 0 {
			return false
		}
		cert, err := trust.ParseCert(ca)
		if err != nil {
			return false
		}
		c.caPool = x509.NewCertPool()
		c.caPool.AddCert(cert)
		c.token = strings.TrimSpace(string(tok))
		return true
	})
	c.hc = c.httpClient()
	ca, _ := os.ReadFile(caFile)
	cert, _ := trust.ParseCert(ca)
	for _, m := range c.members[1:] {
		m.args = append(m.args, "--join", first.httpAddr(), "--ca-pin", trust.Pin(cert), "--join-token-file", tokenFile)
	}
	c.waitReady(first)
	for _, m := range c.members[1:] {
		if err := m.start(bin); err != nil {
			t.Fatal(err)
		}
		c.waitReady(m)
	}
	waitFor(t, fmt.Sprintf("%d voters", n), 60*time.Second, func() bool {
		var ms []api.Member
		_, err := c.client(first).Do(context.Background(), http.MethodGet, "/v1/members", nil, &ms)
		return err == nil && len(ms) == n
	})
	return c
}

// httpClient reaches the members from the bridge's namespace, trusting the
// cluster CA. Calls are bounded by their context.
func (c *coordinator) httpClient() *http.Client {
	tr := &http.Transport{
		DialContext:         dialInNamespace,
		TLSClientConfig:     &tls.Config{RootCAs: c.caPool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: 2 * time.Second,
		MaxIdleConnsPerHost: 4,
	}
	c.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// client is an admin's API client of member m alone.
func (c *coordinator) client(m *member) *client.Client {
	cl := client.New("https://"+m.httpAddr(), c.hc)
	cl.SetBearerToken(c.token)
	return cl
}

// waitReady waits until m answers /readyz (it knows a leader).
func (c *coordinator) waitReady(m *member) {
	cl := c.client(m)
	waitFor(c.t, m.id+" ready", 60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cl.Do(ctx, http.MethodGet, "/readyz", nil, nil)
		return err == nil
	})
}

// leader returns the member that says it leads, or nil.
func (c *coordinator) leader() *member {
	for _, m := range c.members {
		m.mu.Lock()
		ok := m.cmd != nil && !m.frozen
		m.mu.Unlock()
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		var ms []api.Member
		_, err := c.client(m).Do(ctx, http.MethodGet, "/v1/members", nil, &ms)
		cancel()
		if err != nil {
			continue
		}
		for _, x := range ms {
			if x.Leader {
				for _, mm := range c.members {
					if mm.id == x.ID {
						return mm
					}
				}
			}
		}
	}
	return nil
}

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, within, 50*time.Millisecond, "timed out waiting for %s", what)
}
