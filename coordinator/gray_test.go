package coordinator_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/agenttest"
	"github.com/moltproject/molt/phases"
)

// Gray failures: a member that stops answering without closing anything
// (its process frozen by SIGSTOP, or cut off by a firewall that drops
// packets) must hold agents up no longer than a member that died. The
// tests freeze a member from the outside: every connection of its REST API
// and of its Raft transport stops moving bytes in both directions, while
// its kernel, as a frozen process's does, still accepts connections.

// freezer is one member's switch: while frozen, no byte goes in or out of
// the connections it wraps.
type freezer struct {
	mu     sync.Mutex
	frozen bool
	thawed chan struct{} // closed when thawed
}

func newFreezer() *freezer {
	f := &freezer{thawed: make(chan struct{})}
	close(f.thawed)
	return f
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.frozen {
		f.frozen, f.thawed = true, make(chan struct{})
	}
}

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		f.frozen = false
		close(f.thawed)
	}
}

// wait returns once the member is not frozen.
func (f *freezer) wait() {
	f.mu.Lock()
	ch := f.thawed
	f.mu.Unlock()
	<-ch
}

func (f *freezer) wrap(c net.Conn) net.Conn { return &frozenConn{Conn: c, f: f} }

// frozenConn holds what it read until the member thaws, and writes only
// when it is not frozen: the peer's bytes sit in the kernel's buffers as
// they would for a stopped process.
type frozenConn struct {
	net.Conn
	f *freezer
}

func (c *frozenConn) Read(b []byte) (int, error) {
	c.f.wait()
	n, err := c.Conn.Read(b)
	c.f.wait()
	return n, err
}

func (c *frozenConn) Write(b []byte) (int, error) {
	c.f.wait()
	return c.Conn.Write(b)
}

type freezingListener struct {
	net.Listener
	f *freezer
}

func (l freezingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.f.wrap(c), nil
}

// grayCluster is a testCluster whose members can be frozen: scope "all"
// freezes a member's API and Raft, "raft" only its Raft (a member cut off
// from its peers that its clients still reach).
type grayCluster struct {
	*testCluster
	api, raft map[string]*freezer
}

func newGrayCluster(t testing.TB, ops *fakeOps) *grayCluster {
	gc := &grayCluster{api: map[string]*freezer{}, raft: map[string]*freezer{}}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("m%d", i)
		gc.api[id], gc.raft[id] = newFreezer(), newFreezer()
	}
	mutate := func(c *coordinator.Config) { c.Raft.WrapConn = gc.raft[c.Raft.NodeID].wrap }
	wrapAPIListener = func(id string, ln net.Listener) net.Listener { return freezingListener{ln, gc.api[id]} }
	defer func() { wrapAPIListener = nil }()
	gc.testCluster = newTestCluster(t, 3, ops, mutate)
	// Thaw before the members stop (cleanups run last-in first-out).
	t.Cleanup(func() {
		for id := range gc.api {
			gc.api[id].thaw()
			gc.raft[id].thaw()
		}
	})
	return gc
}

// freeze freezes member m: its API and Raft ("all") or its Raft only.
func (gc *grayCluster) freeze(m *member, scope string) {
	gc.raft[m.id].freeze()
	if scope == "all" {
		gc.api[m.id].freeze()
	}
}

// patientAgent plays the real agent's loop (agent.Run) as far as the
// coordinator sees it: one client over every member, configured as the
// agent's (client.ConfigureTransport); a long poll that asks for wait and
// gives up only after wait+10 s; results and heartbeats without a
// deadline of their own. With wait far above the test's timeout, only a
// client that notices the frozen member can make progress.
type patientAgent struct {
	cluster, node string
	cl            *client.Client
	wait          time.Duration
	mu            sync.Mutex
	executed      []string // operation IDs in the order executed
	at            []time.Time
}

func startPatientAgent(ctx context.Context, t testing.TB, tc *testCluster, cluster, node string, endpoints []string, wait time.Duration) *patientAgent {
	var cred *agentCred
	err := whileNoLeader(t, "enrollment of "+node, func() (err error) {
		cred, err = enrollAgent(ctx, tc.waitLeader().client(), tc.waitLeader().addr, cluster, node)
		return err
	})
	require.NoError(t, err)
	tr := client.ConfigureTransport(&http.Transport{TLSClientConfig: agentTLS(cred.cert)})
	t.Cleanup(tr.CloseIdleConnections)
	a := &patientAgent{cluster: cluster, node: node, wait: wait,
		cl: client.NewEndpoints(endpoints, &http.Client{Transport: tr})}
	go a.run(ctx)
	return a
}

func (a *patientAgent) run(ctx context.Context) {
	for ctx.Err() == nil {
		if _, err := a.cl.Register(ctx, api.RegisterRequest{Cluster: a.cluster, Node: a.node, Address: a.node + ":7443"}); err == nil {
			break
		}
		pause(ctx, 100*time.Millisecond)
	}
	go func() {
		for ctx.Err() == nil {
			_ = a.cl.Heartbeat(ctx, api.AgentHealth{Cluster: a.cluster, Node: a.node, Kubelet: api.ComponentHealth{Healthy: true}, Containerd: api.ComponentHealth{Healthy: true}})
			pause(ctx, time.Second)
		}
	}()
	done := map[string]api.OperationResult{}
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, a.wait+10*time.Second)
		ops, err := a.cl.PollOperations(pctx, a.cluster, a.node, a.wait)
		cancel()
		if err != nil {
			pause(ctx, 100*time.Millisecond)
			continue
		}
		for _, op := range ops {
			res, ok := done[op.ID]
			if !ok {
				res = api.OperationResult{ID: op.ID, Kind: op.Kind, State: api.OpSucceeded, Message: "simulated", Details: agenttest.HealthyDetails(op)}
				if op.EtcdSnapshot != nil {
					res = agenttest.Snapshot(ctx, a.cl, a.cluster, a.node, op, time.Now())
				}
				done[op.ID] = res
				a.mu.Lock()
				a.executed, a.at = append(a.executed, op.ID), append(a.at, time.Now())
				a.mu.Unlock()
			}
			for ctx.Err() == nil && a.cl.ReportResult(ctx, a.cluster, a.node, res) != nil {
				pause(ctx, 100*time.Millisecond)
			}
		}
	}
}

// firstAfter returns the first operation executed after t, if any.
func (a *patientAgent) firstAfter(t time.Time) (string, time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, at := range a.at {
		if at.After(t) {
			return a.executed[i], at, true
		}
	}
	return "", time.Time{}, false
}

// whileNoLeader runs op again while it fails with the API's 503
// no-leader or not-leader: the member knew no leader within its CatchUp
// (an election, which a loaded machine brings about in multi-member
// tests) and refused before anything was written, so sending the request
// again is safe; an agent or moltctl tries another member or later too.
// Any other answer is op's.
func whileNoLeader(t testing.TB, what string, op func() error) error {
	t.Helper()
	var err error
	eventually(t, what, func() bool {
		err = op()
		var p *api.Problem
		return !errors.As(err, &p) || p.Status != http.StatusServiceUnavailable ||
			(p.Suffix() != api.ProblemNoLeader && p.Suffix() != api.ProblemNotLeader)
	})
	return err
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func agentTLS(cert *tls.Certificate) *tls.Config {
	return httpsClient(cert).Transport.(*http.Transport).TLSClientConfig
}

// TestFrozenMemberDoesNotHoldAgents freezes the leader (or cuts it off
// from its peers) mid-upgrade while agents sit in long polls at it, or at
// a follower that forwards them to it, and checks that the upgrade goes
// on under the new leader while the old one stays frozen. The agents ask
// for ten-minute polls: before agents and forwarding members pinged their
// connections, each waited on the frozen member until it thawed.
func TestFrozenMemberDoesNotHoldAgents(t *testing.T) {
	for _, tt := range []struct {
		name, scope string
		// atLeader: the agents' first endpoint is the leader, else a follower.
		atLeader bool
	}{
		{"leader frozen, agents at the leader", "all", true},
		{"leader frozen, agents at a follower", "all", false},
		{"leader cut off from its peers, agents at the leader", "raft", true},
		{"leader cut off from its peers, agents at a follower", "raft", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ops := newFakeOps()
			// cp-2's cordon waits for the freeze: the upgrade cannot
			// run past cp-2 before it, however slow the test's polling.
			releaseCP2 := ops.holdCordon("cp-2")
			gc := newGrayCluster(t, ops)
			leader := gc.waitLeader()
			cl := leader.client()
			spec := registerLab(t, cl)
			// Endpoints as an agent's --coordinator lists them, the member
			// it sits on first.
			first := leader
			if !tt.atLeader {
				for _, m := range gc.list() {
					if m != leader {
						first = m
						break
					}
				}
			}
			endpoints := []string{"https://" + first.addr}
			for _, m := range gc.list() {
				if m != first {
					endpoints = append(endpoints, "https://"+m.addr)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			agents := map[string]*patientAgent{}
			for _, n := range nodeNames(spec) {
				agents[n] = startPatientAgent(ctx, t, gc.testCluster, "lab", n, endpoints, 10*time.Minute)
			}
			waitAgents(t, gc.testCluster, "lab", len(agents))
			err := whileNoLeader(t, "the upgrade started", func() error {
				_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
				return err
			})
			require.NoError(t, err)
			// Freeze once the control plane is under way and every agent
			// has had the time to sit in a long poll: cp-1 upgraded, cp-2's
			// cordon held, so none of cp-2's or cp-3's operations can have
			// been dispatched yet.
			eventually(t, "cp-1 upgraded and cp-2's cordon under way", func() bool {
				u, err := getUpgrade(ctx, cl, "lab")
				if err != nil {
					return false
				}
				n, ok := u.Node("cp-1")
				return ok && n.State == phases.StateDone && ops.called("cordon cp-2")
			})
			// The member to freeze is the one leading now: under load the
			// first leader can lose its lease before (an election then
			// held the test's own requests, holdForLeader), and freezing
			// a follower would test nothing. The agents' endpoints keep
			// their order.
			if now := gc.waitLeader(); now != leader {
				t.Logf("%s leads now, not %s; the agents' first endpoint is %s", now.id, leader.id, first.id)
				leader = now
			}
			frozenAt := time.Now()
			gc.freeze(leader, tt.scope)
			t.Logf("froze %s (%s)", leader.id, tt.scope)
			releaseCP2()

			var next string
			var nextAt time.Time
			eventually(t, "an operation dispatched after the freeze", func() bool {
				for _, n := range []string{"cp-2", "cp-3"} {
					if id, at, ok := agents[n].firstAfter(frozenAt); ok {
						next, nextAt = id, at
						return true
					}
				}
				return false
			})
			t.Logf("next operation %s executed %v after the freeze", next, nextAt.Sub(frozenAt))
			// The rest of the upgrade runs without the frozen member.
			var others []*member
			for _, m := range gc.list() {
				if m != leader {
					others = append(others, m)
				}
			}
			eventually(t, "upgrade done without the frozen member", func() bool {
				for _, m := range others {
					c, err := m.c.Cluster("lab")
					if err == nil && c.Status.Upgrade != nil && c.Status.Upgrade.State == api.UpgradeDone {
						return true
					}
				}
				return false
			})
			require.True(t, slices.ContainsFunc(others, func(m *member) bool { return m.c.IsLeader() }), "a member that was not frozen leads")
		})
	}
}

// BenchmarkFailoverToNextStep measures, with production Raft timing and
// agents configured as real ones (ten-minute polls at the leader, pings),
// the time from a fault of the leader mid-upgrade to the next operation
// an agent runs (performance table row P3): the leader killed, frozen, or
// cut off from the other members while its agents still reach it.
// Run with -benchtime=10x for the median and max of ten.
func BenchmarkFailoverToNextStep(b *testing.B) {
	productionTiming = true
	defer func() { productionTiming = false }()
	for _, fault := range []string{"kill", "freeze", "partition"} {
		b.Run(fault, func(b *testing.B) {
			var samples []time.Duration
			for i := 0; i < b.N; i++ {
				samples = append(samples, nextStepAfter(b, fault))
			}
			slices.Sort(samples)
			b.ReportMetric(samples[len(samples)/2].Seconds(), "median-s")
			b.ReportMetric(samples[len(samples)-1].Seconds(), "max-s")
		})
	}
}

// nextStepAfter upgrades a fresh 3-member coordinator's cluster until
// cp-1 is done, then kills, freezes or cuts off the leader, and returns how long
// until an agent ran the next operation.
func nextStepAfter(b *testing.B, fault string) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	gc := newGrayCluster(b, newFakeOps())
	leader := gc.waitLeader()
	cl := leader.client()
	spec := registerLab(b, cl)
	endpoints := []string{"https://" + leader.addr}
	for _, m := range gc.list() {
		if m != leader {
			endpoints = append(endpoints, "https://"+m.addr)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agents := map[string]*patientAgent{}
	for _, n := range nodeNames(spec) {
		agents[n] = startPatientAgent(ctx, b, gc.testCluster, "lab", n, endpoints, 10*time.Minute)
	}
	waitAgents(b, gc.testCluster, "lab", len(agents))
	_, err := cl.Do(ctx, http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(b, err)
	eventually(b, "cp-1 upgraded", func() bool {
		u, err := getUpgrade(ctx, cl, "lab")
		if err != nil {
			return false
		}
		n, ok := u.Node("cp-1")
		return ok && n.State == phases.StateDone
	})
	at := time.Now()
	switch fault {
	case "kill":
		leader.stop(true)
	case "freeze":
		gc.freeze(leader, "all")
	default: // cut off from its peers; its agents still reach it
		gc.freeze(leader, "raft")
	}
	var next time.Time
	eventually(b, "an operation after the fault", func() bool {
		for _, a := range agents {
			if _, t, ok := a.firstAfter(at); ok && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
		return !next.IsZero()
	})
	return next.Sub(at)
}
