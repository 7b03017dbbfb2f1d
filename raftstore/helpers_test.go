package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/testlog"
)

// waitTimeout bounds every poll in these tests; generous because the tests
// run under -race on a small shared machine.
const waitTimeout = 30 * time.Second

// testLogger logs to t.Log (see internal/testlog for the switches).
func testLogger(t testing.TB) *slog.Logger { return testlog.New(t) }

// testConfig is a member on a free loopback port with short Raft timeouts.
func testConfig(t testing.TB, id string) Config {
	cfg := DefaultConfig()
	cfg.NodeID = id
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.HTTPAddr = fmt.Sprintf("%s.molt.test:8443", id)
	cfg.DataDir = t.TempDir()
	// Short, for quick elections of one-member clusters (which need no
	// quorum contact). Multi-member clusters use clusterTiming.
	cfg.HeartbeatTimeout = 300 * time.Millisecond
	cfg.ElectionTimeout = 300 * time.Millisecond
	cfg.LeaderLeaseTimeout = 300 * time.Millisecond
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.ApplyTimeout = waitTimeout
	cfg.Logger = testLogger(t)
	return cfg
}

// node is one member under test; cfg.RaftAddr is rewritten to the bound
// address after the first Open, so a restart reuses the port peers know.
type node struct {
	cfg Config
	kv  *kvMachine
	s   *Store
}

// open starts (or restarts) n with a fresh machine, rebuilt from disk.
func (n *node) open(t testing.TB) { n.openAs(t, false) }

// openAs is open with a machine of the release before cmdTag when old is
// set: a member running an older binary.
func (n *node) openAs(t testing.TB, old bool) {
	t.Helper()
	n.kv = newKV()
	n.kv.old = old
	s, err := Open(n.cfg, n.kv)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	n.s = s
	n.cfg.RaftAddr = s.RaftAddr()
}

func newNode(t testing.TB, id string, bootstrap bool) *node {
	t.Helper()
	cfg := testConfig(t, id)
	cfg.Bootstrap = bootstrap
	n := &node{cfg: cfg}
	n.open(t)
	return n
}

// newSoloLeader bootstraps a one-member cluster and waits until it is leader
// and has recorded its own metadata, so no background write races the test.
func newSoloLeader(t testing.TB) *node {
	t.Helper()
	n := newNode(t, "solo", true)
	waitFor(t, "solo leader with its metadata", func() bool {
		_, _, h := n.s.Leader()
		return n.s.IsLeader() && h != ""
	})
	return n
}

// clusterTiming is hashicorp/raft's production timing. On a loaded 2-core
// machine under -race, followers (fsyncing bolt on a shared disk) were seen
// silent for 700 ms, so shorter leases made leaders step down spuriously.
func clusterTiming(cfg *Config) {
	cfg.HeartbeatTimeout = time.Second
	cfg.ElectionTimeout = time.Second
	cfg.LeaderLeaseTimeout = time.Second
}

// newCluster bootstraps n0 and joins the others through the leader.
func newCluster(t testing.TB, size int, tweak func(*Config)) []*node {
	t.Helper()
	nodes := make([]*node, size)
	for i := range nodes {
		cfg := testConfig(t, fmt.Sprintf("n%d", i))
		cfg.Bootstrap = i == 0
		if size > 1 {
			clusterTiming(&cfg)
		}
		if tweak != nil {
			tweak(&cfg)
		}
		nodes[i] = &node{cfg: cfg}
		nodes[i].open(t)
		if i == 0 {
			waitLeader(t, nodes[:1])
			continue
		}
		join(t, nodes[:i], nodes[i])
	}
	waitFor(t, "every member knows every member's HTTP address", func() bool {
		for _, n := range nodes {
			ms, err := n.s.Members()
			if err != nil || len(ms) != size {
				return false
			}
			for _, m := range ms {
				if m.HTTPAddr == "" {
					return false
				}
			}
		}
		return true
	})
	return nodes
}

// join adds n through the current leader of nodes, retrying when leadership
// moves under it (Join is idempotent).
func join(t testing.TB, nodes []*node, n *node) {
	t.Helper()
	retryOnLeaderChange(t, nodes, func(l *node) error {
		return l.s.Join(ctx(t), n.cfg.NodeID, n.s.RaftAddr(), n.cfg.HTTPAddr)
	})
}

// putAny puts through the current leader of nodes, retrying when leadership
// moves under it, and returns the version of the write that succeeded. A
// lost attempt that still committed is overwritten by the retry.
func putAny(t testing.TB, nodes []*node, key, value string) uint64 {
	t.Helper()
	var v any
	retryOnLeaderChange(t, nodes, func(l *node) (err error) {
		v, err = l.s.Apply(ctx(t), putBody{Key: key, Value: value})
		return err
	})
	return v.(uint64)
}

func retryOnLeaderChange(t testing.TB, nodes []*node, op func(leader *node) error) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		err := op(waitLeader(t, nodes))
		if err == nil {
			return
		}
		// ErrHalted: a halted member was elected and is handing over.
		if attempt >= 5 || !(errors.Is(err, ErrNotLeader) || errors.Is(err, ErrLeadershipLost) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrHalted)) {
			require.NoError(t, err)
		}
		t.Logf("retrying after leadership moved: %v", err)
	}
}

// ctx is a test context bounded by waitTimeout.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return c
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", waitTimeout, what)
		}
		<-tick.C
	}
}

// waitLeader waits until exactly one of nodes is leader and all of them
// agree on it, and returns it.
func waitLeader(t testing.TB, nodes []*node) *node {
	t.Helper()
	var leader *node
	waitFor(t, "one agreed leader", func() bool {
		leader = nil
		for _, n := range nodes {
			if n.s.IsLeader() {
				if leader != nil {
					return false
				}
				leader = n
			}
		}
		if leader == nil {
			return false
		}
		for _, n := range nodes {
			if id, _, _ := n.s.Leader(); id != leader.cfg.NodeID {
				return false
			}
		}
		return true
	})
	return leader
}

// waitKV waits until every node's machine equals want.
func waitKV(t testing.TB, nodes []*node, want map[string]kvEntry) {
	t.Helper()
	waitFor(t, "every replica holds the committed state", func() bool {
		for _, n := range nodes {
			if !mapsEqual(n.kv.dump(), want) {
				return false
			}
		}
		return true
	})
}

func mapsEqual(a, b map[string]kvEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func without(nodes []*node, gone *node) []*node {
	var out []*node
	for _, n := range nodes {
		if n != gone {
			out = append(out, n)
		}
	}
	return out
}

// put applies a put through s and returns the new version.
func put(t testing.TB, s *Store, key, value string) uint64 {
	t.Helper()
	v, err := s.Apply(ctx(t), putBody{Key: key, Value: value})
	require.NoError(t, err)
	return v.(uint64)
}

// barrierOnLeader returns the member that leads once a Barrier of its own
// has committed. With two members left, a loaded machine can delay the
// leader's heartbeats past the other's election timeout, and the leader
// loses its leadership mid-barrier (ErrLeadershipLost) — a real election,
// not a fault; the question the callers ask is what whoever leads has
// applied, so a barrier refused for leadership is asked of the next leader.
func barrierOnLeader(t testing.TB, nodes []*node) *node {
	t.Helper()
	var leader *node
	waitFor(t, "a leader whose barrier commits", func() bool {
		leader = waitLeader(t, nodes)
		err := leader.s.Barrier(ctx(t))
		if errors.Is(err, ErrLeadershipLost) || errors.Is(err, ErrNotLeader) {
			t.Logf("barrier on %s: %v; asking the next leader", leader.cfg.NodeID, err)
			return false
		}
		require.NoError(t, err)
		return true
	})
	return leader
}
