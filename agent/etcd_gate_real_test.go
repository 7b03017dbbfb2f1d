package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/moltproject/molt/internal/cachedir"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/internal/testenv"
)

// realMember is one etcd process on loopback with its own data directory.
type realMember struct {
	name, client, peer, dir string
	cmd                     *exec.Cmd
	logs                    *bytes.Buffer
	exited                  chan error
}

func loopbackURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return fmt.Sprintf("http://127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}

func (m *realMember) start(t *testing.T, bin, initial string) {
	t.Helper()
	m.logs = &bytes.Buffer{}
	m.cmd = exec.Command(bin, "--name", m.name, "--data-dir", m.dir,
		"--listen-client-urls", m.client, "--advertise-client-urls", m.client,
		"--listen-peer-urls", m.peer, "--initial-advertise-peer-urls", m.peer,
		"--initial-cluster", initial, "--initial-cluster-state", "new", "--log-level", "info")
	m.cmd.Stdout, m.cmd.Stderr = m.logs, m.logs
	require.NoError(t, m.cmd.Start())
	m.exited = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(m.cmd, m.exited)
	t.Cleanup(func() { m.stop() })
}

// stop ends the member as the kubelet does a static pod it replaces.
func (m *realMember) stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	select {
	case <-m.exited:
	default:
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		<-m.exited
	}
	m.cmd = nil
}

// clusterVersion is the member's /version answer's etcdcluster.
func clusterVersion(url string) string {
	resp, err := http.Get(url + "/version")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return v.Cluster
}

// TestEtcdGateRollingUpgrade35To36 runs the agent's sampler and gate on a
// real three-member etcd 3.5.21 cluster under writes, replaces its members
// one at a time with 3.6.4 on the same data (what the kubelet does with a
// new etcd manifest), and checks what docs/etcd.md says: the gate passes
// after each member; the cluster version stays 3.5 while a 3.5 member is
// left and moves to 3.6 with the last one; a 3.5 member then does not
// start on its data.
func TestEtcdGateRollingUpgrade35To36(t *testing.T) {
	builds := cachedir.Build()
	old := testenv.RequireFile(t, filepath.Join(builds, "etcd", "v3.5.21", "bin", "etcd"), "etcd 3.5.21 (build/k8s/etcd.sh 3.5.21)")
	cur := testenv.RequireFile(t, filepath.Join(builds, "etcd", "v3.6.4", "bin", "etcd"), "etcd 3.6.4 (build/k8s/etcd.sh)")

	members := make([]*realMember, 3)
	var initial, endpoints []string
	for i := range members {
		m := &realMember{name: fmt.Sprintf("cp-%d", i+1), client: loopbackURL(t), peer: loopbackURL(t), dir: filepath.Join(t.TempDir(), "etcd")}
		members[i] = m
		initial = append(initial, m.name+"="+m.peer)
		endpoints = append(endpoints, m.client)
	}
	for _, m := range members {
		m.start(t, old, strings.Join(initial, ","))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()

	// The API servers' writes: the raft index moves all along.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	wctx, stopWrites := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; wctx.Err() == nil; i++ {
			pctx, c := context.WithTimeout(wctx, time.Second)
			_, _ = cli.Put(pctx, "/registry/leases/x", fmt.Sprint(i))
			c()
			select {
			case <-wctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	defer func() { stopWrites(); wg.Wait() }()

	a := &Agent{clock: clock.Real{}, log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}
	s := &etcdClient{cli: cli, now: time.Now}
	summary, err := a.etcdGate(ctx, s, 3, time.Minute)
	require.NoError(t, err, summary)
	require.Equal(t, "3.5.0", clusterVersion(members[0].client))

	for i, m := range members {
		before, err := s.SampleEtcd(ctx)
		require.NoError(t, err)
		require.Len(t, before.Members, 3)
		m.stop()
		m.start(t, cur, strings.Join(initial, ","))
		summary, err := a.etcdGate(ctx, s, len(before.Members), time.Minute)
		require.NoError(t, err, summary)
		t.Logf("%s on 3.6.4: gate %s", m.name, summary)
		if i < len(members)-1 {
			require.Equal(t, "3.5.0", clusterVersion(m.client), "a 3.5 member is left: the cluster stays 3.5")
		}
	}
	require.Eventually(t, func() bool { return clusterVersion(members[0].client) == "3.6.0" }, time.Minute, 100*time.Millisecond,
		"every member at 3.6: the cluster version moves to 3.6")

	// A 3.5 member put back on its data does not stay up.
	m := members[2]
	m.stop()
	m.start(t, old, strings.Join(initial, ","))
	select {
	case err := <-m.exited:
		require.Error(t, err, "etcd 3.5.21 exited cleanly in a 3.6 cluster")
		t.Logf("etcd 3.5.21 in a 3.6 cluster: %v: %s", err, fatalLine(m.logs.String()))
	case <-time.After(time.Minute):
		t.Fatalf("etcd 3.5.21 still runs a minute after it joined a 3.6 cluster; log tail: %s", tail(m.logs.String(), 800))
	}
	m.cmd = nil
}

// fatalLine is the message etcd died with.
func fatalLine(logs string) string {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"level":"fatal"`) || strings.Contains(l, `"level":"panic"`) {
			var e map[string]any
			if json.Unmarshal([]byte(l), &e) == nil {
				delete(e, "stacktrace")
				b, _ := json.Marshal(e)
				return string(b)
			}
			return tail(l, 600)
		}
	}
	return tail(logs, 600)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
