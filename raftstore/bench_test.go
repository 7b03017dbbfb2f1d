package raftstore

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// quiet drops logs: benchmarks measure the store, not t.Log.
func quiet(c *Config) { c.Logger = slog.New(slog.DiscardHandler) }

// BenchmarkApplyLatency measures the commit latency of one small command,
// one at a time, with fsync on: Apply returns once a quorum has the
// entry on disk and the leader's FSM applied it. Reported as p50/p99.
func BenchmarkApplyLatency(b *testing.B) {
	for _, size := range []int{1, 3} {
		b.Run(fmt.Sprintf("members=%d", size), func(b *testing.B) {
			nodes := newCluster(b, size, quiet)
			leader := waitLeader(b, nodes)
			var lat []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				if _, err := leader.s.Apply(context.Background(), putBody{Key: fmt.Sprintf("k%d", i%64), Value: "v"}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				i++
			}
			reportPercentiles(b, lat)
		})
	}
}

// BenchmarkApplyParallel measures throughput with many concurrent writers
// on 3 members, where Raft batches appends (and fsyncs) together.
func BenchmarkApplyParallel(b *testing.B) {
	nodes := newCluster(b, 3, quiet)
	leader := waitLeader(b, nodes)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := leader.s.Apply(context.Background(), putBody{Key: "k", Value: "v"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkFsync measures what one durable append costs on the data
// directory's disk: a small write and fsync, as the log makes for every
// append. A commit on 3 members waits for two in a row (the leader's own
// append, then a follower's), bolt's log took two fsyncs per append
// (docs/performance.md, P4).
func BenchmarkFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 128)
	var lat []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}
