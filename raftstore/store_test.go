package raftstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSingleMemberBootstrapAndApply(t *testing.T) {
	n := newNode(t, "solo", true)
	s := n.s
	require.NoError(t, s.WaitForLeader(ctx(t)))
	waitFor(t, "solo is leader", s.IsLeader)
	require.DirExists(t, filepath.Join(n.cfg.DataDir, walDir))
	require.NoFileExists(t, filepath.Join(n.cfg.DataDir, boltFile))

	v1 := put(t, s, "a", "1")
	v2 := put(t, s, "b", "2")
	require.Greater(t, v2, v1)
	require.Equal(t, map[string]kvEntry{"a": {"1", v1}, "b": {"2", v2}}, n.kv.dump())
	require.GreaterOrEqual(t, s.AppliedIndex(), v2)

	_, err := s.Apply(ctx(t), delBody{Key: "a"})
	require.NoError(t, err)
	_, ok := n.kv.get("a")
	require.False(t, ok)

	// The bootstrapped member records its own metadata once leader.
	waitFor(t, "own HTTP address is replicated", func() bool {
		_, _, h := s.Leader()
		return h != ""
	})
	id, raftAddr, httpAddr := s.Leader()
	require.Equal(t, "solo", id)
	require.Equal(t, s.RaftAddr(), raftAddr)
	require.Equal(t, n.cfg.HTTPAddr, httpAddr)

	ms, err := s.Members()
	require.NoError(t, err)
	require.Equal(t, []Member{{ID: "solo", RaftAddr: s.RaftAddr(), HTTPAddr: n.cfg.HTTPAddr, Voter: true, Leader: true}}, ms)

	st := s.Stats()
	require.Equal(t, "Leader", st.State)
	require.Equal(t, 0, st.NumPeers)
	require.Equal(t, "solo", st.LeaderID)
	require.GreaterOrEqual(t, st.CommitIndex, v2)
	require.GreaterOrEqual(t, st.Term, uint64(1))
	require.NoError(t, s.Barrier(ctx(t)))
}

func TestApplyDomainRefusal(t *testing.T) {
	n := newSoloLeader(t)
	v := put(t, n.s, "k", "v1")

	tests := []struct {
		name     string
		expected *uint64
		wantErr  error
	}{
		{name: "stale version refused", expected: ptr(v - 1), wantErr: errStale},
		{name: "absent expected but present", expected: ptr[uint64](0), wantErr: errStale},
		{name: "future version refused", expected: ptr(v + 100), wantErr: errStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := n.kv.dump()
			_, err := n.s.Apply(ctx(t), putBody{Key: "k", Value: "v2", ExpectedVersion: tt.expected})
			require.ErrorIs(t, err, tt.wantErr)
			require.Equal(t, before, n.kv.dump(), "a refused command changes nothing")
		})
	}
	t.Run("current version accepted", func(t *testing.T) {
		got, err := n.s.Apply(ctx(t), putBody{Key: "k", Value: "v2", ExpectedVersion: ptr(v)})
		require.NoError(t, err)
		e, _ := n.kv.get("k")
		require.Equal(t, kvEntry{Value: "v2", Version: got.(uint64)}, e)
	})
}

func TestApplyRefusesUnregisteredTypes(t *testing.T) {
	n := newSoloLeader(t)
	before := n.s.AppliedIndex()
	for name, typ := range map[string]CommandType{
		"unregistered domain":  FirstDomainType + 90,
		"unregistered flagged": (FirstDomainType + 90) | IgnoreUnknown,
		"internal":             cmdSetMember,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := n.s.Apply(ctx(t), rawCmd{typ, struct{}{}})
			require.ErrorIs(t, err, ErrUnknownCommand)
		})
	}
	require.Equal(t, before, n.s.AppliedIndex(), "nothing was written to the log")

	// A registered flagged type is an ordinary command.
	_, err := n.s.Apply(ctx(t), noteBody{})
	require.NoError(t, err)
}

func TestApplyHonoursContext(t *testing.T) {
	n := newSoloLeader(t)
	c, cancel := context.WithCancel(context.Background())
	cancel()
	before := n.s.AppliedIndex()
	_, err := n.s.Apply(c, putBody{Key: "k"})
	require.ErrorIs(t, err, ErrTimeout)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, before, n.s.AppliedIndex(), "a command whose caller gave up is not appended")
	_, ok := n.kv.get("k")
	require.False(t, ok)
}

func TestClosedStore(t *testing.T) {
	n := newSoloLeader(t)
	ch := n.s.LeaderCh()
	require.NoError(t, n.s.Close())
	require.NoError(t, n.s.Close(), "Close is idempotent")
	require.NoError(t, n.s.Kill(), "Kill after Close is a no-op")

	_, err := n.s.Apply(ctx(t), putBody{Key: "k"})
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, n.s.Barrier(ctx(t)), ErrClosed)
	require.ErrorIs(t, n.s.Join(ctx(t), "x", "127.0.0.1:1", ""), ErrClosed)
	require.ErrorIs(t, n.s.Remove(ctx(t), "x"), ErrClosed)
	require.ErrorIs(t, n.s.WaitForLeader(ctx(t)), ErrClosed)
	require.ErrorIs(t, n.s.Snapshot(), ErrClosed)
	_, err = n.s.Members()
	require.ErrorIs(t, err, ErrClosed)
	require.False(t, n.s.IsLeader())
	require.Equal(t, "Shutdown", n.s.Stats().State)

	for range ch { // drains to the close
	}
}

func TestOpenValidates(t *testing.T) {
	base := testConfig(t, "n")
	tests := []struct {
		name  string
		tweak func(*Config)
		m     Machine
	}{
		{"no node id", func(c *Config) { c.NodeID = "" }, newKV()},
		{"no raft addr", func(c *Config) { c.RaftAddr = "" }, newKV()},
		{"no data dir", func(c *Config) { c.DataDir = "" }, newKV()},
		{"nil machine", func(*Config) {}, nil},
		{"reserved handler", func(*Config) {}, registryMachine{map[CommandType]ApplyFunc{3: newKV().put}}},
		{"bad raft timing", func(c *Config) { c.LeaderLeaseTimeout = 10 * c.HeartbeatTimeout }, newKV()},
		{"unusable raft addr", func(c *Config) { c.RaftAddr = "0.0.0.0:0" }, newKV()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.DataDir = t.TempDir()
			tt.tweak(&cfg)
			var m Machine
			if tt.m != nil {
				m = tt.m
			}
			s, err := Open(cfg, m)
			if s != nil {
				_ = s.Close()
			}
			require.Error(t, err)
		})
	}
}

func TestReopenNeverRebootstraps(t *testing.T) {
	for _, bootstrapAgain := range []bool{true, false} {
		name := map[bool]string{true: "bootstrap flag kept", false: "bootstrap flag dropped"}[bootstrapAgain]
		t.Run(name, func(t *testing.T) {
			n := newNode(t, "solo", true)
			waitFor(t, "leader", n.s.IsLeader)
			v := put(t, n.s, "a", "1")
			waitFor(t, "own metadata", func() bool { _, _, h := n.s.Leader(); return h != "" })
			term := n.s.Stats().Term
			require.NoError(t, n.s.Close())

			n.cfg.Bootstrap = bootstrapAgain
			n.open(t)
			waitFor(t, "leader again", n.s.IsLeader)
			require.NoError(t, n.s.Barrier(ctx(t)))
			require.Equal(t, map[string]kvEntry{"a": {"1", v}}, n.kv.dump())
			require.Greater(t, n.s.Stats().Term, term, "the old log and term were kept")
			ms, err := n.s.Members()
			require.NoError(t, err)
			require.Len(t, ms, 1)
			require.Equal(t, n.cfg.HTTPAddr, ms[0].HTTPAddr)
		})
	}
}

func TestLeaderChFollowsLeadership(t *testing.T) {
	n := newNode(t, "solo", true)
	ch := n.s.LeaderCh()
	waitFor(t, "LeaderCh says leader", func() bool {
		select {
		case v := <-ch:
			return v
		default:
			return false
		}
	})
	// A late subscriber learns the current state at once.
	require.True(t, <-n.s.LeaderCh())
	require.NoError(t, n.s.Close())
	var last *bool
	for v := range ch {
		last = &v
	}
	if last != nil {
		require.False(t, *last, "the last value before close is false")
	}
}

func TestSnapshotRestartRestoresFromSnapshot(t *testing.T) {
	n := newNode(t, "solo", true)
	n.cfg.TrailingLogs = 1 // compact the log so a restart must use the snapshot
	require.NoError(t, n.s.Close())
	n.open(t)
	waitFor(t, "leader", n.s.IsLeader)
	waitFor(t, "own metadata", func() bool { _, _, h := n.s.Leader(); return h != "" })

	for i, k := range []string{"a", "b", "c", "d"} {
		put(t, n.s, k, string(rune('0'+i)))
	}
	want := n.kv.dump()
	require.NoError(t, n.s.Snapshot())
	require.NoError(t, n.s.Snapshot(), "nothing new to snapshot is not an error")
	entries, err := os.ReadDir(filepath.Join(n.cfg.DataDir, "snapshots"))
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	applied := n.s.AppliedIndex()
	require.NoError(t, n.s.Close())

	n.open(t)
	require.Equal(t, int32(1), n.kv.restores.Load(), "Open restored the snapshot")
	require.Equal(t, want, n.kv.dump(), "state is back before any leader exists")
	require.Equal(t, applied, n.s.AppliedIndex())
	ms, err := n.s.Members()
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, n.cfg.HTTPAddr, ms[0].HTTPAddr, "member metadata survives in the snapshot")
}
