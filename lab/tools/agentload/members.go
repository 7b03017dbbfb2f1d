package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/trust"
)

// member is one molt-coordinator process.
type member struct {
	id, httpAddr, raftAddr, dir string
	cmd                         *exec.Cmd
	done                        chan struct{}
}

// coordinator is the three members and an admin's view of them.
type coordinator struct {
	members []*member
	ca      *x509.Certificate
	caPEM   string
	token   string // the bootstrap admin token
	hc      *http.Client
}

// startMembers starts three members on loopback: the first bootstraps,
// the others join it with its CA pin and admin token.
func startMembers(ctx context.Context, bin, dir string) (*coordinator, error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	co := &coordinator{}
	for i := range 3 {
		id := fmt.Sprintf("m%d", i+1)
		co.members = append(co.members, &member{id: id, dir: filepath.Join(dir, id),
			httpAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i]), raftAddr: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])})
	}
	first := co.members[0]
	if err := first.start(bin); err != nil {
		return nil, err
	}
	caFile, tokenFile := filepath.Join(first.dir, "tls", "ca.crt"), filepath.Join(first.dir, "admin.token")
	if err := waitFor(ctx, "the first member's CA and admin token", time.Minute, func() bool {
		ca, err1 := os.ReadFile(caFile)
		tok, err2 := os.ReadFile(tokenFile)
		if err1 != nil || err2 != nil || len(tok) == 0 {
			return false
		}
		cert, err := trust.ParseCert(ca)
		co.ca, co.caPEM, co.token = cert, string(ca), strings.TrimSpace(string(tok))
		return err == nil
	}); err != nil {
		co.stop()
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(co.ca)
	co.hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	// The token's file is written before the member has stored it: the
	// others join once it answers with it.
	if err := waitFor(ctx, "the first member to know its admin token", time.Minute, func() bool {
		_, err := co.list(ctx)
		return err == nil
	}); err != nil {
		co.stop()
		return nil, err
	}
	for _, m := range co.members[1:] {
		if err := m.start(bin, "--join", first.httpAddr, "--ca-pin", trust.Pin(co.ca), "--join-token-file", tokenFile); err != nil {
			co.stop()
			return nil, err
		}
	}
	if err := waitFor(ctx, "3 voters and a leader", 2*time.Minute, func() bool {
		ms, err := co.list(ctx)
		return err == nil && len(ms) == 3 && co.leaderOf(ms) != ""
	}); err != nil {
		co.stop()
		return nil, err
	}
	return co, nil
}

func (m *member) start(bin string, extra ...string) error {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	logf, err := os.Create(m.dir + ".log")
	if err != nil {
		return err
	}
	args := append([]string{"--node-id", m.id, "--data-dir", m.dir, "--http-addr", m.httpAddr, "--raft-addr", m.raftAddr, "--log-level", "warn"}, extra...)
	m.cmd = exec.Command(bin, args...)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if err := m.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	m.done = make(chan struct{})
	go func() {
		// How a member ended is in its log, whether stopped or not.
		err := m.cmd.Wait()
		fmt.Fprintf(logf, "agentload: member %s ended: %v (%s)\n", m.id, err, m.cmd.ProcessState)
		logf.Close()
		close(m.done)
	}()
	return nil
}

// stop stops every member (SIGTERM, then SIGKILL after 10 s).
func (co *coordinator) stop() {
	for _, m := range co.members {
		if m.cmd == nil || m.cmd.Process == nil {
			continue
		}
		_ = m.cmd.Process.Signal(os.Interrupt)
		select {
		case <-m.done:
		case <-time.After(10 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.done
		}
	}
}

// admin is an admin's client of member m alone.
func (co *coordinator) admin(m *member) *client.Client {
	cl := client.New("https://"+m.httpAddr, co.hc)
	cl.SetBearerToken(co.token)
	return cl
}

func (co *coordinator) list(ctx context.Context) ([]api.Member, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var ms []api.Member
	_, err := co.admin(co.members[0]).Do(ctx, http.MethodGet, "/v1/members", nil, &ms)
	return ms, err
}

func (co *coordinator) leaderOf(ms []api.Member) string {
	for _, m := range ms {
		if m.Leader {
			return m.ID
		}
	}
	return ""
}

// endpoints are the members' API URLs, in the members' order.
func (co *coordinator) endpoints() []string {
	var out []string
	for _, m := range co.members {
		out = append(out, "https://"+m.httpAddr)
	}
	return out
}

// registerCluster puts a release and a cluster of n nodes (one
// control-plane node, the rest workers) and returns the node names.
func (co *coordinator) registerCluster(ctx context.Context, name string, n int) ([]string, error) {
	cl := client.NewEndpoints(co.endpoints(), co.hc)
	cl.SetBearerToken(co.token)
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	rel := api.Release{Version: "1.33.6", EndOfSupport: time.Now().AddDate(1, 0, 0).UTC().Truncate(time.Hour), Channels: []string{"regular"},
		Components: api.ReleaseComponents{
			Kubelet:    api.BinaryArtifact{URL: "http://artifacts.test/kubelet-1.33.6", SHA256: sum},
			Containerd: api.BinaryArtifact{URL: "http://artifacts.test/containerd-1.33.6", SHA256: sum, Version: "1.7.0"},
		}}
	if _, err := cl.Do(ctx, http.MethodPut, "/v1/releases/1.33.6", rel, nil); err != nil {
		return nil, fmt.Errorf("put release: %w", err)
	}
	spec := api.ClusterSpec{Name: name, Kind: api.ClusterStandalone, Version: "1.33.6",
		Pools: []api.Pool{{Name: "cp", Role: api.RoleControlPlane, Nodes: []api.Node{{Name: "cp-0"}}}, {Name: "workers", Role: api.RoleWorker}}}
	nodes := []string{"cp-0"}
	for i := 1; i < n; i++ {
		node := fmt.Sprintf("w-%d", i)
		spec.Pools[1].Nodes = append(spec.Pools[1].Nodes, api.Node{Name: node})
		nodes = append(nodes, node)
	}
	if _, err := cl.Do(ctx, http.MethodPut, "/v1/clusters/"+name, spec, nil); err != nil {
		return nil, fmt.Errorf("put cluster: %w", err)
	}
	return nodes, nil
}

// bootstrapToken creates a bootstrap token that enrolls uses agents.
func (co *coordinator) bootstrapToken(ctx context.Context, cluster string, uses int) (string, error) {
	cl := client.NewEndpoints(co.endpoints(), co.hc)
	cl.SetBearerToken(co.token)
	var tok api.Token
	_, err := cl.Do(ctx, http.MethodPost, "/v1/tokens", api.TokenRequest{Kind: api.TokenBootstrap, Cluster: cluster, Uses: uses}, &tok)
	return tok.Secret, err
}

// state is what the members say at one moment.
type state struct {
	at            time.Time
	leader        string
	applied       map[string]float64 // member → molt_raft_applied_index
	leaderChanges map[string]float64 // member → molt_raft_leader_changes_total
}

// snapshot reads the members' list and metrics, again (five times at
// most, a second apart) when a request fails: a connection of this
// process's own, set up while 15,000 agents keep theirs, can be closed
// before its handshake (the members bound handshakes in progress), and a
// probe that failed once says nothing of the agents' beats.
func (co *coordinator) snapshot(ctx context.Context) (state, error) {
	var err error
	for range 5 {
		var s state
		if s, err = co.snapshotOnce(ctx); err == nil {
			return s, nil
		}
		log.Printf("agentload: reading the members: %v (again in 1 s)", err)
		select {
		case <-ctx.Done():
			return state{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return state{}, err
}

func (co *coordinator) snapshotOnce(ctx context.Context) (state, error) {
	ms, err := co.list(ctx)
	if err != nil {
		return state{}, err
	}
	s := state{at: time.Now(), leader: co.leaderOf(ms), applied: map[string]float64{}, leaderChanges: map[string]float64{}}
	for _, m := range co.members {
		metrics, err := co.metrics(ctx, m)
		if err != nil {
			return state{}, err
		}
		s.applied[m.id] = metrics["molt_raft_applied_index"]
		s.leaderChanges[m.id] = metrics["molt_raft_leader_changes_total"]
	}
	return s, nil
}

// metrics reads member m's unlabelled samples.
func (co *coordinator) metrics(ctx context.Context, m *member) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+m.httpAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+co.token)
	resp, err := co.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics: %s", m.id, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// watchRSS samples every member's VmRSS once a second for d and returns
// each one's highest, in MiB.
func (co *coordinator) watchRSS(ctx context.Context, d time.Duration) map[string]float64 {
	peak := map[string]float64{}
	var mu sync.Mutex
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		for _, m := range co.members {
			if v, err := rssMiB(m.cmd.Process.Pid); err == nil {
				mu.Lock()
				peak[m.id] = max(peak[m.id], v)
				mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return peak
}

// rssMiB reads a process's VmRSS.
func rssMiB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// freePorts returns n ports the kernel had free on loopback.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// waitFor polls cond every 200 ms until it holds, within d.
func waitFor(ctx context.Context, what string, d time.Duration, cond func() bool) error {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return fmt.Errorf("timed out after %s waiting for %s", d, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
