package coordinator_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/agenttest"
	"github.com/moltproject/molt/preflight"
	"github.com/moltproject/molt/raftstore"
)

// BenchmarkPreflight15k runs preflights of a 15,000-host cluster on one
// member (real Raft, bolt log, HTTP API, production tick) with simulated
// agents: after
// registering and one heartbeat each, the agents poll in rounds (32 at a
// time, no long poll) and answer every preflight operation at once with a
// success. It reports the time from the start request to the stored
// report (s/preflight), from the last result acknowledged to the stored
// report (s-after-last-result), the largest entry in the Raft log
// (entry-bytes, whatever its command) and the Raft entries each
// preflight commits.
func BenchmarkPreflight15k(b *testing.B) {
	const n = 15000
	dir := b.TempDir()
	m := startMemberAt(b, "m1", dir, true, newFakeOps(), "", "127.0.0.1:0", nil, func(cfg *coordinator.Config) {
		// Keep every entry, so the largest can be read back afterwards.
		cfg.Raft.SnapshotThreshold = 1 << 40
		cfg.Raft.TrailingLogs = 1 << 40
		// Agents beat once, before the runs; none may go missing during them.
		cfg.MissingAfter = time.Hour
		// The production tick, not the tests' 50 ms: every tick scans all
		// 15,000 agents and operations, which at 50 ms would dominate.
		cfg.TickInterval = coordinator.DefaultConfig().TickInterval
		// Every host's artifact check offered at once: the simulated
		// agents fetch nothing, and waves of 20 would take 750 rounds of
		// 15,000 polls; what is measured is the log and the report.
		cfg.PreflightArtifactWave = -1
	})
	eventually(b, "leader", m.c.IsLeader)
	put(b, m.client(), "/v1/releases/1.33.6", release("1.33.6"))
	put(b, m.client(), "/v1/releases/1.34.4", release("1.34.4"))
	// A kubeconfig, so that the leader reads the cluster through the fake
	// ClusterOps (every node Ready, /readyz ok).
	spec := api.ClusterSpec{Kubeconfig: "apiVersion: v1\nkind: Config\n", Name: "big", Kind: api.ClusterStandalone, Version: "1.33.6"}
	spec.Pools = []api.Pool{{Name: "cp", Role: api.RoleControlPlane, Nodes: []api.Node{{Name: "cp-0"}}}}
	w := api.Pool{Name: "workers", Role: api.RoleWorker}
	for i := 1; i < n; i++ {
		w.Nodes = append(w.Nodes, api.Node{Name: fmt.Sprintf("w-%d", i)})
	}
	spec.Pools = append(spec.Pools, w)
	put(b, m.client(), "/v1/clusters/big", spec)
	nodes := nodeNames(spec)

	ctx := context.Background()
	creds := enrollMany(b, m, "big", nodes)
	parallel(nodes, 32, func(node string) {
		cl := creds[node].client(m.addr)
		_, err := cl.Register(ctx, api.RegisterRequest{Cluster: "big", Node: node, Address: node + ":7443"})
		if err == nil {
			err = cl.Heartbeat(ctx, api.AgentHealth{Cluster: "big", Node: node, Time: time.Now(),
				Kubelet: api.ComponentHealth{Healthy: true, Version: "v1.33.6"}, Containerd: api.ComponentHealth{Healthy: true, Version: "1.7.0"}})
		}
		if err != nil {
			b.Error(err)
		}
	})
	waitAgents(b, tc1(m), "big", n)

	b.ResetTimer()
	var total, afterLast time.Duration
	var entries uint64
	for i := 0; i < b.N; i++ {
		idx0 := m.c.Store().AppliedIndex()
		start := time.Now()
		run, err := m.client().StartPreflight(ctx, "big", "1.34.4")
		require.NoError(b, err)
		prefix := "preflight-" + run.ID + "-"
		// Rounds until every operation is answered (the first may come
		// before the leader's tick offers them), then the leader's tick
		// sees the run complete and commits the report.
		var answered, lastAck atomic.Int64
		for round := 0; answered.Load() < 2*n; round++ {
			require.Less(b, round, 100, "operations never all offered")
			parallel(nodes, 32, func(node string) {
				cl := creds[node].client(m.addr)
				ops, err := cl.PollOperations(ctx, "big", node, 0)
				if err != nil {
					b.Error(err)
					return
				}
				for _, op := range ops {
					if !strings.HasPrefix(op.ID, prefix) {
						continue
					}
					res := api.OperationResult{ID: op.ID, Kind: op.Kind, State: api.OpSucceeded, Details: agenttest.HealthyDetails(op)}
					if err := cl.ReportResult(ctx, "big", node, res); err != nil {
						b.Error(err)
					}
					answered.Add(1)
					lastAck.Store(time.Now().UnixNano())
				}
			})
			if b.Failed() {
				b.FailNow()
			}
		}
		eventually(b, "preflight done", func() bool {
			got, err := m.c.Preflight("big", run.ID)
			return err == nil && got.State == "done"
		})
		total += time.Since(start)
		afterLast += time.Since(time.Unix(0, lastAck.Load()))
		entries += m.c.Store().AppliedIndex() - idx0

		b.StopTimer()
		got, err := m.c.Preflight("big", run.ID)
		require.NoError(b, err)
		require.Equal(b, preflight.Passed, got.Report.Verdict, "%+v", got.Report.Failed)
		require.Len(b, got.Results, 2*n, "every host answered both operations")
		b.StartTimer()
	}
	b.StopTimer()
	m.stop(false)
	size, typ := largestEntry(b, filepath.Join(dir, "wal"))
	b.Logf("largest Raft entry: %d bytes, command type %d", size, typ)
	b.ReportMetric(total.Seconds()/float64(b.N), "s/preflight")
	b.ReportMetric(float64(size), "entry-bytes")
	b.ReportMetric(afterLast.Seconds()/float64(b.N), "s-after-last-result")
	b.ReportMetric(float64(entries)/float64(b.N), "raft-entries/preflight")
}

// tc1 wraps one member as a test cluster, for helpers that take one.
func tc1(m *member) *testCluster { return &testCluster{members: []*member{m}} }

// largestEntry reads a stopped member's Raft log (its wal directory) and
// returns the size of its largest command entry and that command's type.
func largestEntry(b *testing.B, path string) (int, raftstore.CommandType) {
	s, err := wal.Open(path, wal.WithMetaStore(&metadb.BoltMetaDB{}))
	require.NoError(b, err)
	defer s.Close()
	first, err := s.FirstIndex()
	require.NoError(b, err)
	last, err := s.LastIndex()
	require.NoError(b, err)
	size, typ := 0, raftstore.CommandType(0)
	for i := first; i <= last; i++ {
		var l raft.Log
		require.NoError(b, s.GetLog(i, &l))
		if l.Type == raft.LogCommand && len(l.Data) > size {
			size = len(l.Data)
			t, _, err := raftstore.Decode(l.Data)
			require.NoError(b, err)
			typ = t
		}
	}
	require.Equal(b, uint64(1), first, "the log was compacted: the largest entry may be gone")
	return size, typ
}
