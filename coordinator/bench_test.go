package coordinator_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// BenchmarkHeartbeats15k registers 15,000 agents on one member and sends
// rounds of heartbeats over real HTTPS, as 15,000 agents beating every 10 s
// would (1,500 beats/s). Each agent enrolls and beats with its own client
// certificate, so over its own TLS connection. Both ends of 15,000 kept
// connections in one test process need more open files than this machine
// allows (20,000), so the 15,000 agents open a new connection per beat,
// resuming their TLS session (agentCred.perRequest) — dearer than the
// kept connection of a real agent; kept-6k measures kept connections with
// 6,000 agents. It reports latency percentiles, the Raft entries a steady
// round commits (only changes are committed), CPU per beat and RSS.
func BenchmarkHeartbeats15k(b *testing.B) {
	b.Run("new-connection-15k", func(b *testing.B) { heartbeats(b, 15000, true) })
	b.Run("kept-6k", func(b *testing.B) { heartbeats(b, 6000, false) })
}

// BenchmarkHeartbeats3Members is BenchmarkHeartbeats15k on a 3-member
// coordinator with production Raft timing, at the rate 15,000 agents
// beating every 10 s send (1,500 beats/s): the agents beat at the leader,
// or at a follower, which forwards each beat to the leader (performance
// table row P2). CPU and RSS are the whole test process's: three members
// and the agents' clients. Unpaced, a saturated process on a shared
// 2-core machine starved Raft's heartbeats and the leader flapped.
// MOLT_BENCH_AGENTS sets how many agents (default 15,000) share that rate.
func BenchmarkHeartbeats3Members(b *testing.B) {
	productionTiming = true
	defer func() { productionTiming = false }()
	n := 15000
	if v, err := strconv.Atoi(os.Getenv("MOLT_BENCH_AGENTS")); err == nil && v > 0 {
		n = v // fewer agents, same beat rate: a shorter run on a busy machine
	}
	b.Run("leader", func(b *testing.B) { heartbeatsAt(b, 3, false, n, true, 1500) })
	b.Run("follower", func(b *testing.B) { heartbeatsAt(b, 3, true, n, true, 1500) })
	// Kept connections, as real agents keep theirs: what the follower's
	// path adds is not hidden behind a TLS handshake per beat. At most
	// 6,000 agents (open files, BenchmarkHeartbeats15k).
	k := min(n, 6000)
	b.Run("leader-kept", func(b *testing.B) { heartbeatsAt(b, 3, false, k, false, 1500) })
	b.Run("follower-kept", func(b *testing.B) { heartbeatsAt(b, 3, true, k, false, 1500) })
}

func heartbeats(b *testing.B, n int, perRequest bool) { heartbeatsAt(b, 1, false, n, perRequest, 0) }

// heartbeatsAt runs the heartbeat benchmark on a coordinator of size
// members, the agents talking to the leader or to a follower; rate > 0
// paces the beats (per second), 0 sends them as fast as 32 workers can.
func heartbeatsAt(b *testing.B, size int, atFollower bool, n int, perRequest bool, rate float64) {
	tc := newTestCluster(b, size, newFakeOps())
	leader := tc.waitLeader()
	m := leader
	if atFollower {
		for _, x := range tc.list() {
			if x != leader {
				m = x
				break
			}
		}
	}
	spec := api.ClusterSpec{Name: "big", Kind: api.ClusterStandalone, Version: "1.33.6"}
	spec.Pools = []api.Pool{{Name: "cp", Role: api.RoleControlPlane, Nodes: []api.Node{{Name: "cp-0"}}}}
	w := api.Pool{Name: "workers", Role: api.RoleWorker}
	for i := 1; i < n; i++ {
		w.Nodes = append(w.Nodes, api.Node{Name: fmt.Sprintf("w-%d", i)})
	}
	spec.Pools = append(spec.Pools, w)
	put(b, leader.client(), "/v1/clusters/big", spec)
	var nodes []string
	for _, p := range spec.Pools {
		for _, nd := range p.Nodes {
			nodes = append(nodes, nd.Name)
		}
	}
	ctx := context.Background()
	// Every agent holds its own certificate, so its own TLS connection,
	// as 15,000 real agents do.
	creds := enrollMany(b, leader, "big", nodes)
	for _, c := range creds {
		c.perRequest = perRequest
	}
	parallel(nodes, 32, func(node string) {
		if _, err := creds[node].client(m.addr).Register(ctx, api.RegisterRequest{Cluster: "big", Node: node}); err != nil {
			b.Error(err)
		}
	})
	beat := func(node string) api.AgentHealth {
		return api.AgentHealth{Cluster: "big", Node: node, Kubelet: api.ComponentHealth{Healthy: true, Version: "v1.33.6"},
			Containerd: api.ComponentHealth{Healthy: true, Version: "1.7.0"}, Time: time.Now()}
	}
	// Two warm-up rounds: the first commits the health each agent reports
	// once (and brings back agents marked missing while 15,000 registered).
	for range 2 {
		pacedParallel(nodes, 32, rate, func(node string) { _ = creds[node].client(m.addr).Heartbeat(ctx, beat(node)) })
	}

	b.ResetTimer()
	var lat []time.Duration
	var mu sync.Mutex
	startIdx := leader.c.Store().AppliedIndex()
	cpu0 := cpuTime()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		pacedParallel(nodes, 32, rate, func(node string) {
			t0 := time.Now()
			if err := creds[node].client(m.addr).Heartbeat(ctx, beat(node)); err != nil {
				b.Error(err)
			}
			d := time.Since(t0)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	beats := float64(len(lat))
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(beats/elapsed.Seconds(), "beats/s")
	b.ReportMetric(float64(leader.c.Store().AppliedIndex()-startIdx)/elapsed.Seconds(), "raft-entries/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/beats, "cpu-µs/beat")
	b.ReportMetric(rssMiB(), "rss-MiB")
}

func parallel(items []string, workers int, fn func(string)) { pacedParallel(items, workers, 0, fn) }

// pacedParallel is parallel with items handed out at rate per second (0:
// as fast as the workers take them).
func pacedParallel(items []string, workers int, rate float64, fn func(string)) {
	ch := make(chan string)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				fn(it)
			}
		}()
	}
	start := time.Now()
	for i, it := range items {
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		ch <- it
	}
	close(ch)
	wg.Wait()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssMiB is the process's peak resident set (the whole test process:
// coordinator, HTTP clients and all).
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			f := strings.Fields(l)
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	return 0
}

// BenchmarkFailoverToDispatch measures, with production Raft timeouts, the
// time from killing the leader mid-upgrade to the new leader offering the
// next agent operation.
func BenchmarkFailoverToDispatch(b *testing.B) {
	productionTiming = true
	defer func() { productionTiming = false }()
	var samples []time.Duration
	for i := 0; i < b.N; i++ {
		samples = append(samples, failoverOnce(b))
	}
	slices.Sort(samples)
	b.ReportMetric(samples[len(samples)/2].Seconds(), "median-s")
	b.ReportMetric(samples[len(samples)-1].Seconds(), "max-s")
}

func failoverOnce(b *testing.B) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	tc := newTestCluster(b, 3, newFakeOps())
	cl := tc.waitLeader().client()
	put(b, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(b, cl, "/v1/releases/1.34.4", release("1.34.4"))
	put(b, cl, "/v1/clusters/lab", clusterSpec("lab", "1.33.6"))
	ctx := context.Background()
	ag, err := enrollAgent(ctx, cl, tc.waitLeader().addr, "lab", "cplb-1")
	require.NoError(b, err)
	_, err = ag.client(tc.waitLeader().addr).Register(ctx, api.RegisterRequest{Cluster: "lab", Node: "cplb-1"})
	require.NoError(b, err)
	agentsCtx, stop := context.WithCancel(ctx)
	defer stop()
	startAgents(agentsCtx, tc, "lab", nodeNames(clusterSpec("lab", "1.33.6")), true)
	waitAgents(b, tc, "lab", 7)
	_, err = cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(b, err)
	// The first agent operation of cplb-1 is offered; the agent never runs
	// it, so the new leader must offer it again.
	eventually(b, "operation offered", func() bool {
		ops, err := ag.client(tc.waitLeader().addr).PollOperations(ctx, "lab", "cplb-1", 0)
		return err == nil && len(ops) > 0
	})
	old := tc.leader()
	killed := time.Now()
	old.stop(true)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, m := range tc.alive() {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			ops, err := ag.client(m.addr).PollOperations(pctx, "lab", "cplb-1", 0)
			cancel()
			if err == nil && len(ops) > 0 {
				return time.Since(killed)
			}
		}
		if time.Since(killed) > waitTimeout {
			b.Fatal("no operation offered after the leader was killed")
		}
		<-tick.C
	}
}
