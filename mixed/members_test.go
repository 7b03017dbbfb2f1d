//go:build mixed

package mixed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// member is one molt-coordinator process on loopback, as
// linearizability's members are without their namespaces.
type member struct {
	id                 string
	dataDir, logPath   string
	httpAddr, raftAddr string
	args               []string

	mu   sync.Mutex
	bin  string // the binary it runs (or ran last)
	cmd  *exec.Cmd
	done chan struct{}
	// exited is set when the process ended without being told to.
	exited error
}

// start runs the member with bin.
func (m *member) start(bin string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== start %s with %s\n", time.Now().Format(time.RFC3339Nano), bin)
	cmd := exec.Command(bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		logf.Close()
		m.mu.Lock()
		if m.cmd == cmd { // nobody stopped it
			m.exited = fmt.Errorf("%s (%s) exited by itself: %v", m.id, filepath.Base(bin), err)
			m.cmd = nil
		}
		m.mu.Unlock()
		close(done)
	}()
	m.bin, m.cmd, m.done, m.exited = bin, cmd, done, nil
	return nil
}

// stop sends sig and waits for the process to end.
func (m *member) stop(sig syscall.Signal) {
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
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (m *member) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

// exitedByItself says whether the member ended without being stopped.
func (m *member) exitedByItself() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exited
}

// coordinator is the members and what clients need to reach them.
type coordinator struct {
	t         *testing.T
	members   []*member
	caPool    *x509.CertPool
	caFile    string
	token     string
	tokenFile string
	hc        *http.Client
	// moltctlConfig is an empty moltctl configuration file: flags say
	// everything, and no operator's file on the machine is read.
	moltctlConfig string
}

// freePorts returns n ports free now, below the kernel's ephemeral range
// (32768 and up): a member restarted on its address must find its port
// unused, and an ephemeral one may meanwhile be some connection's source.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	for range 100 {
		base := 20000 + rand.IntN(10000)
		var ports []int
		for p := base; p < base+n; p++ {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				break
			}
			ln.Close()
			ports = append(ports, p)
		}
		if len(ports) == n {
			return ports
		}
	}
	t.Fatal("no free ports")
	return nil
}

// startCoordinator starts n members with bins[i]: the first bootstraps,
// the others join it with its CA pin and admin token (docs/security.md).
func startCoordinator(t *testing.T, bins []string, extra ...string) *coordinator {
	t.Helper()
	work := t.TempDir()
	ports := freePorts(t, 2*len(bins))
	c := &coordinator{t: t, moltctlConfig: filepath.Join(work, "moltctl.yaml")}
	require.NoError(t, os.WriteFile(c.moltctlConfig, []byte("{}\n"), 0o600))
	for i := range bins {
		id := fmt.Sprintf("m%d", i+1)
		m := &member{id: id, dataDir: filepath.Join(work, id), logPath: filepath.Join(work, id+".log"),
			httpAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i]), raftAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])}
		m.args = append([]string{"--node-id", id, "--data-dir", m.dataDir, "--http-addr", m.httpAddr,
			"--raft-addr", m.raftAddr, "--log-level", "info"}, extra...)
		c.members = append(c.members, m)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			m.stop(syscall.SIGKILL)
		}
		if t.Failed() {
			for _, m := range c.members {
				b, _ := os.ReadFile(m.logPath)
				lines := strings.Split(string(b), "\n")
				t.Logf("--- last lines of %s's log:\n%s", m.id, strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	})
	first := c.members[0]
	require.NoError(t, first.start(bins[0]))
	c.caFile = filepath.Join(first.dataDir, "tls", "ca.crt")
	c.tokenFile = filepath.Join(first.dataDir, "admin.token")
	var pin string
	waitFor(t, "the first member's CA and admin token", time.Minute, func() bool {
		ca, err1 := os.ReadFile(c.caFile)
		tok, err2 := os.ReadFile(c.tokenFile)
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
		pin = trust.Pin(cert)
		return true
	})
	c.hc = c.httpClient(nil)
	c.waitReady(first)
	for i, m := range c.members[1:] {
		m.args = append(m.args, "--join", first.httpAddr, "--ca-pin", pin, "--join-token-file", c.tokenFile)
		require.NoError(t, m.start(bins[i+1]))
		// Ready, or halted: a member given an entry it cannot read
		// (halt_test.go) may meet it while it catches up after joining.
		waitFor(t, m.id+" ready or halted", 90*time.Second, func() bool {
			err := c.ready(m)
			return err == nil || problemRule(err) == "member-halted"
		})
	}
	waitFor(t, fmt.Sprintf("%d voters", len(bins)), time.Minute, func() bool {
		ms, _, err := c.membersOf(first)
		return err == nil && len(ms) == len(bins)
	})
	return c
}

// httpClient trusts the cluster CA and presents cert when not nil.
func (c *coordinator) httpClient(cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: c.caPool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg, TLSHandshakeTimeout: 2 * time.Second, MaxIdleConnsPerHost: 4}
	c.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// endpoints are every member's API URL.
func (c *coordinator) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, "https://"+m.httpAddr)
	}
	return eps
}

// client is an admin client that fails over between every member.
func (c *coordinator) client() *client.Client {
	cl := client.NewEndpoints(c.endpoints(), c.hc)
	cl.SetBearerToken(c.token)
	return cl
}

// clientOf is an admin client of member m alone.
func (c *coordinator) clientOf(m *member) *client.Client {
	cl := client.New("https://"+m.httpAddr, c.hc)
	cl.SetBearerToken(c.token)
	return cl
}

// membersOf is m's member list and the index its answer reflects.
func (c *coordinator) membersOf(m *member) ([]api.Member, uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cl := c.clientOf(m)
	var ms []api.Member
	_, err := cl.Do(ctx, http.MethodGet, "/v1/members", nil, &ms)
	return ms, cl.Seen(), err
}

// ready is m's /readyz: nil when 200.
func (c *coordinator) ready(m *member) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := c.clientOf(m).Do(ctx, http.MethodGet, "/readyz", nil, nil)
	return err
}

// waitReady waits until m answers /readyz.
func (c *coordinator) waitReady(m *member) {
	c.t.Helper()
	waitFor(c.t, m.id+" ready", 90*time.Second, func() bool { return c.ready(m) == nil })
}

// leader is the member every running member that answers names as
// leader, or nil. A halted member does not answer an operator's read
// (credential-freshness, docs/mixed-versions.md).
func (c *coordinator) leader() *member {
	var named string
	for _, m := range c.members {
		if !m.running() {
			continue
		}
		ms, _, err := c.membersOf(m)
		if err != nil {
			continue
		}
		who := ""
		for _, x := range ms {
			if x.Leader {
				who = x.ID
			}
		}
		if who == "" || (named != "" && who != named) {
			return nil
		}
		named = who
	}
	return c.byID(named)
}

func (c *coordinator) byID(id string) *member {
	for _, m := range c.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// waitLeader waits until the running members agree on a leader.
func (c *coordinator) waitLeader() *member {
	c.t.Helper()
	var l *member
	waitFor(c.t, "one leader", 90*time.Second, func() bool { l = c.leader(); return l != nil })
	return l
}

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, within, 100*time.Millisecond, "timed out waiting for %s", what)
}

// problemRule is the rule of a refusal, "" for another error.
func problemRule(err error) string {
	var p *api.Problem
	if errors.As(err, &p) {
		return p.Rule
	}
	return ""
}
