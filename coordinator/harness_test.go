package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/coordinator/httpapi"
	"github.com/moltproject/molt/internal/agenttest"
	"github.com/moltproject/molt/internal/testlog"
	"github.com/moltproject/molt/internal/version"
	"github.com/moltproject/molt/metrics"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
	"github.com/moltproject/molt/raftstore"
)

const waitTimeout = 60 * time.Second

// productionTiming keeps raftstore's default (production) Raft timeouts,
// for benchmarks whose numbers should mean something in production.
var productionTiming = false

// wrapAPIListener, when set, wraps the REST listener of every member
// started (gray_test.go freezes members with it).
var wrapAPIListener func(id string, ln net.Listener) net.Listener

// wrapService, when set, wraps what the API of every member started
// serves (relay_test.go counts how heartbeats reach the leader).
var wrapService func(id string, s httpapi.Services) httpapi.Services

// startupChecked, when set, hears each answer of startupWritesDone while
// startMemberAt waits (startup_test.go holds a write until the harness
// has seen it missing). Set and read on the test's goroutine only.
var startupChecked func(done bool)

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func testLogger(t testing.TB) *slog.Logger { return testlog.New(t) }

// member is one in-process coordinator with its HTTP server.
type member struct {
	id     string
	dir    string
	addr   string
	c      *coordinator.Coordinator
	srv    *http.Server
	cancel context.CancelFunc
	done   chan struct{}
	dead   atomic.Bool
	// apiConfig is what the member's API was built with.
	apiConfig httpapi.Config
	// commands counts the commands its state machine applied (not Raft's
	// own entries: a term's no-op, a read index's barrier).
	commands *atomic.Uint64
}

// logMark is where a member's log stands: its applied index and the
// number of commands applied. Raft's own entries (a new term's no-op, the
// barrier of a term's first read index) take indexes without being
// commands, so a test that asks "did this request write a command?"
// compares commands, and finds the command by its index.
type logMark struct{ index, commands uint64 }

func (m *member) mark() logMark {
	return logMark{index: m.c.AppliedIndex(), commands: m.commands.Load()}
}

type testCluster struct {
	t       testing.TB
	mu      sync.Mutex // guards members: agents read it while tests restart members
	members []*member
	ops     *fakeOps
}

func memberConfig(t testing.TB, id, dir, httpAddr, raftAddr string, bootstrap bool, ops *fakeOps, clock coordinator.Clock) coordinator.Config {
	cfg := coordinator.DefaultConfig()
	cfg.Raft.NodeID = id
	cfg.Raft.RaftAddr = raftAddr
	cfg.Raft.HTTPAddr = httpAddr
	cfg.Raft.DataDir = dir
	cfg.Raft.Bootstrap = bootstrap
	if !productionTiming {
		cfg.Raft.HeartbeatTimeout = 500 * time.Millisecond
		cfg.Raft.ElectionTimeout = 500 * time.Millisecond
		cfg.Raft.LeaderLeaseTimeout = 250 * time.Millisecond
	}
	cfg.Raft.CommitTimeout = 5 * time.Millisecond
	cfg.TickInterval = 50 * time.Millisecond
	cfg.RetryBackoff = 10 * time.Millisecond
	testTrust(t)
	cfg.CA = testCA
	cfg.BootstrapAdmin = testAdminRec
	cfg.Keyring = testKeyring
	cfg.Raft.TLS = raftTLS(memberCert(t, id))
	cfg.Logger = testLogger(t)
	if ops != nil {
		cfg.Connector = ops
	}
	if clock != nil {
		cfg.Clock = clock
	}
	return cfg
}

// startMember opens a member on free loopback ports and serves its API.
func startMember(t testing.TB, id, dir string, bootstrap bool, ops *fakeOps, addr string, mutate ...func(*coordinator.Config)) *member {
	return startMemberAt(t, id, dir, bootstrap, ops, addr, "127.0.0.1:0", nil, mutate...)
}

func startMemberAt(t testing.TB, id, dir string, bootstrap bool, ops *fakeOps, addr, raftAddr string, clock coordinator.Clock, mutate ...func(*coordinator.Config)) *member {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := listenAPI(addr)
	require.NoError(t, err)
	m := &member{id: id, dir: dir, addr: ln.Addr().String(), done: make(chan struct{}), commands: new(atomic.Uint64)}
	if wrapAPIListener != nil {
		ln = wrapAPIListener(id, ln)
	}
	cfg := memberConfig(t, id, dir, m.addr, raftAddr, bootstrap, ops, clock)
	cert := memberCert(t, id)
	fwd := client.ConfigureTransport(httpsClient(cert).Transport.(*http.Transport))
	cfg.ProbeMember = httpapi.ProbeMember(fwd)
	for _, f := range mutate {
		f(&cfg)
	}
	hold, commands := cfg.Raft.HoldApply, m.commands
	cfg.Raft.HoldApply = func(index uint64) {
		if hold != nil {
			hold(index)
		}
		commands.Add(1)
	}
	reg := prometheus.NewRegistry()
	cfg.Recorder = metrics.NewRecorder(reg)
	m.c, err = coordinator.New(cfg)
	require.NoError(t, err)
	reg.MustRegister(metrics.NewCoordinatorCollector(m.c))
	m.apiConfig = httpapi.Config{MaxPoll: 2 * time.Second, Gatherer: reg, ForwardTransport: fwd, ArtifactDir: t.TempDir(), Clock: cfg.Clock}
	svc := httpapi.ServicesOf(m.c)
	if wrapService != nil {
		svc = wrapService(id, svc)
	}
	m.srv = httpapi.NewServer(httpapi.New(svc, m.apiConfig))
	go func() { _ = m.srv.Serve(tlsListen(ln, cert)) }()
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { defer close(m.done); _ = m.c.Run(ctx) }()
	t.Cleanup(func() { m.stop(false) })
	if bootstrap {
		// The leader stores the bootstrap admin token when it starts
		// leading; tests act as that admin. Its own member metadata is
		// its other start-up write: tests that count log entries
		// (requireOnlyAuditRecord, FuzzAPI) start after both.
		eventually(t, "the bootstrap admin token and the member's metadata stored", func() bool {
			done := m.startupWritesDone()
			if startupChecked != nil {
				startupChecked(done)
			}
			return done
		})
	}
	return m
}

// startupWritesDone reports whether the entries a new leader writes by
// itself are applied here: the bootstrap admin token (the coordinator's
// leader loop, ensureBootstrapAdmin), its own member metadata with its
// HTTP address (raftstore's recordSelf) and the record of its
// capabilities (watchMembers). Each is committed from its own goroutine
// once the member leads, in any order, so the token alone does not say
// the others are done.
func (m *member) startupWritesDone() bool {
	if _, err := m.c.AuthenticateToken(testAdmin); err != nil {
		return false
	}
	if _, ok := m.c.MemberRecords()[m.id]; !ok {
		return false
	}
	ms, err := m.c.Members()
	if err != nil {
		return false
	}
	for _, x := range ms {
		if x.ID == m.id {
			return x.HTTPAddr == m.addr
		}
	}
	return false
}

// stop ends the member: gracefully, or abruptly as a crash would.
func (m *member) stop(crash bool) {
	if m.dead.Swap(true) {
		return
	}
	m.cancel()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		// Shutdown leaves a connection open that is still busy, or was
		// accepted less than 5 s ago and has not sent a request yet (a
		// client's spare dial): close them, or they and their clients'
		// goroutines outlive the member.
		_ = m.srv.Close()
	}
	if crash {
		_ = m.c.Kill()
	} else {
		_ = m.c.Close()
	}
}

// client is an admin's client of the member.
func (m *member) client() *client.Client { return adminClient(m.addr) }

// newTestCluster starts n members: the first bootstraps, the others join.
func newTestCluster(t testing.TB, n int, ops *fakeOps, mutate ...func(*coordinator.Config)) *testCluster {
	tc := &testCluster{t: t, ops: ops}
	first := startMember(t, "m1", t.TempDir(), true, ops, "", mutate...)
	tc.members = append(tc.members, first)
	eventually(t, "first leader", first.c.IsLeader)
	// startMember waited for the first leader's own entries (the bootstrap
	// admin token, its member metadata): a test that counts entries
	// (requireRefusals) starts after them.
	for i := 2; i <= n; i++ {
		m := startMember(t, fmt.Sprintf("m%d", i), t.TempDir(), false, ops, "", mutate...)
		tc.replace(append(tc.list(), m))
		// Joining is idempotent; retry through elections on a loaded machine.
		var err error
		eventually(t, "join "+m.id, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = tc.waitLeader().client().Do(ctx, http.MethodPost, "/v1/members", api.JoinRequest{ID: m.id, RaftAddr: m.c.Store().RaftAddr(), HTTPAddr: m.addr}, nil)
			return err == nil
		})
	}
	// A joiner knows the leader's address once it has applied the
	// leader's member metadata, some time after its join: until then an
	// operator's request at it waits for the address (holdForLeader), and
	// a test that talks to it at once would wait too.
	eventually(t, "every member knows the leader's address", tc.leaderKnown)
	// The leader records the joiners' capabilities once it has asked
	// them: a test that counts entries starts after that record.
	eventually(t, "every member's capabilities recorded", tc.capabilitiesRecorded)
	return tc
}

// capabilitiesRecorded reports whether every live member has applied a
// record of every member's capabilities.
func (tc *testCluster) capabilitiesRecorded() bool {
	ms := tc.alive()
	for _, m := range ms {
		recs := m.c.MemberRecords()
		for _, x := range ms {
			if _, ok := recs[x.id]; !ok {
				return false
			}
		}
	}
	return true
}

// leaderKnown reports whether some member leads and every live member
// knows its HTTP address.
func (tc *testCluster) leaderKnown() bool {
	l := tc.leader()
	if l == nil {
		return false
	}
	for _, m := range tc.alive() {
		if m != l && m.c.LeaderHTTPAddr() != l.addr {
			return false
		}
	}
	return true
}

// list returns the members (dead ones included).
func (tc *testCluster) list() []*member {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return append([]*member(nil), tc.members...)
}

// replace swaps in a new set of members.
func (tc *testCluster) replace(ms []*member) {
	tc.mu.Lock()
	tc.members = ms
	tc.mu.Unlock()
}

func (tc *testCluster) leader() *member {
	for _, m := range tc.list() {
		if !m.dead.Load() && m.c.IsLeader() {
			return m
		}
	}
	return nil
}

func (tc *testCluster) waitLeader() *member {
	var l *member
	eventually(tc.t, "a leader", func() bool { l = tc.leader(); return l != nil })
	return l
}

func (tc *testCluster) alive() []*member {
	var out []*member
	for _, m := range tc.list() {
		if !m.dead.Load() {
			out = append(out, m)
		}
	}
	return out
}

// anyClient returns a client of some live member (followers forward); with
// none alive (a restart in progress) one whose calls fail.
func (tc *testCluster) anyClient(i int) *client.Client {
	a := tc.alive()
	if len(a) == 0 {
		return adminClient("127.0.0.1:1")
	}
	return a[i%len(a)].client()
}

// agentClient returns the agent's client of some live member.
func (tc *testCluster) agentClient(i int, cred *agentCred) *client.Client {
	a := tc.alive()
	if len(a) == 0 {
		return cred.client("127.0.0.1:1")
	}
	return cred.client(a[i%len(a)].addr)
}

// fakeOps stands in for a cluster's API server in coordinator tests: it
// records calls and answers at once. Real API-server behaviour is tested
// in package kube against a real kube-apiserver.
type fakeOps struct {
	mu sync.Mutex
	// kubelets: node → the kubelet version its Node object reports (""
	// for every node not named).
	kubelets map[string]string
	calls    []string
	health   int // health checks to fail before passing
	block    map[string]chan struct{}
	// protected: node → when its pods protected from eviction become
	// evictable (ProtectedUntil).
	protected map[string]time.Time
	// protectFor: node → how long after the first read of its protection
	// its pods stay protected (fixed into protected by that read), so a
	// test's protection starts when the pool does, however loaded the
	// machine is.
	protectFor map[string]time.Duration
	// addonsHold makes ApplyAddons wait, as a rollout that does not
	// finish, until its context ends (the step's deadline).
	addonsHold bool
	// unready: node → why NodeReady says it is not Ready at the version;
	// workloadsShort, when set, is what WorkloadsReady says is short.
	unready        map[string]string
	workloadsShort string
	// gates hold calls by their recorded text (holdCall).
	gates []*callGate
	// readyzFailing is how many more reads of /readyz answer 500 with
	// etcd failing; readyzReads counts the reads.
	readyzFailing, readyzReads int
	// drains: node → the options of its last drain.
	drains map[string]coordinator.DrainOptions
}

// drainOf returns the options of node's last drain.
func (f *fakeOps) drainOf(node string) (coordinator.DrainOptions, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.drains[node]
	return o, ok
}

// failReadyz makes the next n reads of /readyz answer 500, etcd failing.
func (f *fakeOps) failReadyz(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readyzFailing = n
}

// readyzCount is how many times /readyz was read.
func (f *fakeOps) readyzCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readyzReads
}

// setUnready makes NodeReady of node fail with why ("" makes it pass).
func (f *fakeOps) setUnready(node, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unready == nil {
		f.unready = map[string]string{}
	}
	f.unready[node] = why
}

// protectedUntil is when node's protection ends, once it was read.
func (f *fakeOps) protectedUntil(node string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.protected[node]
	return t, ok
}

// callGate holds the calls whose recorded text starts with prefix until
// released; hit is closed at the first such call.
type callGate struct {
	prefix   string
	hit      chan struct{}
	hitOnce  sync.Once
	released chan struct{}
}

// holdCall makes every call whose recorded text starts with prefix
// ("drain n1", "delete node ") wait until release is called or the
// caller's context ends (a member killed); hit is closed when the first
// one arrives.
func (f *fakeOps) holdCall(prefix string) (hit <-chan struct{}, release func()) {
	g := &callGate{prefix: prefix, hit: make(chan struct{}), released: make(chan struct{})}
	f.mu.Lock()
	f.gates = append(f.gates, g)
	f.mu.Unlock()
	var once sync.Once
	return g.hit, func() { once.Do(func() { close(g.released) }) }
}

// gate records call, then waits at every gate that holds it.
func (f *fakeOps) gate(ctx context.Context, call string) error {
	f.record(call)
	f.mu.Lock()
	gates := append([]*callGate(nil), f.gates...)
	f.mu.Unlock()
	for _, g := range gates {
		if !strings.HasPrefix(call, g.prefix) {
			continue
		}
		g.hitOnce.Do(func() { close(g.hit) })
		select {
		case <-g.released:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// holdAddons makes ApplyAddons wait for its deadline (hold) or return at
// once again.
func (f *fakeOps) holdAddons(hold bool) {
	f.mu.Lock()
	f.addonsHold = hold
	f.mu.Unlock()
}

func newFakeOps() *fakeOps { return &fakeOps{block: map[string]chan struct{}{}} }

func (f *fakeOps) Connect(string, []byte) (coordinator.ClusterOps, error) { return f, nil }

func (f *fakeOps) record(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fakeOps) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeOps) Cordon(ctx context.Context, node string) error {
	f.mu.Lock()
	ch := f.block[node]
	f.mu.Unlock()
	f.record("cordon " + node)
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			f.record("cordon cancelled " + node)
			return ctx.Err()
		}
	}
	return nil
}

// holdCordon makes the cordon of node wait until the returned func is called.
func (f *fakeOps) holdCordon(node string) func() {
	ch := make(chan struct{})
	f.mu.Lock()
	f.block[node] = ch
	f.mu.Unlock()
	return func() { close(ch) }
}

func (f *fakeOps) called(s string) bool {
	for _, c := range f.Calls() {
		if c == s {
			return true
		}
	}
	return false
}
func (f *fakeOps) Drain(ctx context.Context, node string, opts coordinator.DrainOptions) (coordinator.Drained, error) {
	f.mu.Lock()
	if f.drains == nil {
		f.drains = map[string]coordinator.DrainOptions{}
	}
	f.drains[node] = opts
	f.mu.Unlock()
	if err := f.gate(ctx, "drain "+node); err != nil {
		return coordinator.Drained{}, err
	}
	return coordinator.Drained{Workloads: []phases.Workload{{Kind: "Deployment", Namespace: "default", Name: "web"}}}, nil
}
func (f *fakeOps) NodeReady(_ context.Context, node, v string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if why := f.unready[node]; why != "" {
		return errors.New(why)
	}
	return nil
}
func (f *fakeOps) WorkloadsReady(_ context.Context, ws []phases.Workload) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.workloadsShort != "" && len(ws) > 0 {
		return errors.New(f.workloadsShort)
	}
	return nil
}
func (f *fakeOps) WaitReady(ctx context.Context, node, v string) error {
	return f.gate(ctx, "ready "+node+" "+v)
}
func (f *fakeOps) Uncordon(ctx context.Context, node string) error {
	return f.gate(ctx, "uncordon "+node)
}
func (f *fakeOps) DeletePods(ctx context.Context, node string) ([]phases.LeftPod, error) {
	return nil, f.gate(ctx, "delete pods "+node)
}
func (f *fakeOps) DeleteNode(ctx context.Context, node string) error {
	return f.gate(ctx, "delete node "+node)
}
func (f *fakeOps) FreezeBlueNode(ctx context.Context, node string) error {
	return f.gate(ctx, "freeze blue "+node)
}
func (f *fakeOps) ThawBlueNode(ctx context.Context, node string) error {
	return f.gate(ctx, "thaw blue "+node)
}
func (f *fakeOps) ProtectedUntil(_ context.Context, node string, _ time.Time) (coordinator.ProtectedInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "protected "+node)
	if d, ok := f.protectFor[node]; ok {
		if _, fixed := f.protected[node]; !fixed {
			if f.protected == nil {
				f.protected = map[string]time.Time{}
			}
			f.protected[node] = time.Now().Add(d).UTC().Truncate(time.Millisecond)
		}
	}
	if t, ok := f.protected[node]; ok {
		return coordinator.ProtectedInfo{Pods: 1, Until: t}, nil
	}
	return coordinator.ProtectedInfo{}, nil
}

// ApplyAddons records "addons VERSION NAME,NAME" (the add-ons' names).
func (f *fakeOps) ApplyAddons(ctx context.Context, v phases.Version, addons []api.AddonManifest) error {
	names := make([]string, 0, len(addons))
	for _, a := range addons {
		names = append(names, a.Name)
	}
	f.record(strings.TrimSpace("addons " + v.String() + " " + strings.Join(names, ",")))
	f.mu.Lock()
	hold := f.addonsHold
	f.mu.Unlock()
	if hold {
		<-ctx.Done()
		return fmt.Errorf("DaemonSet kube-system/kube-proxy: 3 of 7 updated: %w", ctx.Err())
	}
	return nil
}

// PreflightReader answers like a healthy cluster: every asked node Ready,
// /readyz with etcd passing (but for the reads failReadyz fails), no
// blocking PDB, no protected pod.
func (f *fakeOps) PreflightReader() preflight.ClusterReader { return healthyReader{f} }

type healthyReader struct{ f *fakeOps }

func (r healthyReader) Nodes(_ context.Context, nodes []string) (map[string]preflight.NodeInfo, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	out := map[string]preflight.NodeInfo{}
	for _, n := range nodes {
		out[n] = preflight.NodeInfo{Ready: true, KubeletVersion: r.f.kubelets[n]}
	}
	return out, nil
}
func (r healthyReader) ControlPlane(context.Context) (preflight.ControlPlaneHealth, error) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	r.f.readyzReads++
	if r.f.readyzFailing > 0 {
		r.f.readyzFailing--
		return preflight.ParseReadyz(500, "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed"), nil
	}
	return preflight.ParseReadyz(200, "[+]ping ok\n[+]etcd ok\nreadyz check passed"), nil
}
func (healthyReader) BlockingPDBs(context.Context, []string) ([]preflight.PDBInfo, error) {
	return nil, nil
}
func (healthyReader) ProtectedPods(context.Context, []string, time.Time) ([]preflight.ProtectedPod, error) {
	return nil, nil
}

func (healthyReader) DeprecatedAPIs(context.Context) ([]preflight.DeprecatedAPI, error) {
	return nil, nil
}

// Health fails, as the API server's answer would, for a node whose Node
// was deleted (a MIG instance replaced), and for the first f.health calls.
func (f *fakeOps) Health(_ context.Context, v phases.Version, nodes []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	deleted := map[string]bool{}
	for _, c := range f.calls {
		if n, ok := strings.CutPrefix(c, "delete node "); ok {
			deleted[n] = true
		}
	}
	for _, n := range nodes {
		if deleted[n] {
			return fmt.Errorf("node not found: %s", n)
		}
	}
	if f.health > 0 {
		f.health--
		return errors.New("kube-apiserver /readyz: etcd not ready")
	}
	f.calls = append(f.calls, "health "+v.String())
	return nil
}

// simAgent is a simulated agent: it registers, long-polls any live member,
// "executes" each operation once (its journal is a map, as the real agent's
// is a file) and reports results, re-reporting a finished ID without
// executing it again.
type simAgent struct {
	cluster, node string
	// onExecute, when set, plays the host's side of an operation (a
	// kubelet restarted at a new version reports it to the API server).
	onExecute func(node string, op api.Operation)
	// preflightOnly agents answer preflight host checks and nothing else.
	preflightOnly bool
	// kubelet is the kubelet version the agent reports ("v1.34.4"; "" for
	// none, as agents of bare-metal nodes here do). fleet sets it to the
	// release of its instance's template.
	kubelet string
	// fail, when set, decides that an operation fails, with that message
	// ("" lets it succeed).
	fail func(node string, op api.Operation) string
	// silent, when set, decides that an operation is never answered (a
	// host whose new agent does not come back).
	silent func(node string, op api.Operation) bool
	// agentVersion is the release it says it runs: molt's, until an
	// UpdateAgent replaces it.
	agentVersion string
	mu           sync.Mutex
	executed     map[string]int
	results      map[string]api.OperationResult
	// upgradeOf is the Upgrade each polled operation named; upgrades the
	// upgrade each poll answer named, in order ("-" for none given).
	upgradeOf map[string]string
	upgrades  []string
}

func runAgents(ctx context.Context, tc *testCluster, cluster string, nodes []string) map[string]*simAgent {
	return startAgents(ctx, tc, cluster, nodes, false)
}

func startAgents(ctx context.Context, tc *testCluster, cluster string, nodes []string, preflightOnly bool) map[string]*simAgent {
	return startAgentsWith(ctx, tc, cluster, nodes, preflightOnly, nil)
}

func startAgentsWith(ctx context.Context, tc *testCluster, cluster string, nodes []string, preflightOnly bool, onExecute func(string, api.Operation)) map[string]*simAgent {
	agents := map[string]*simAgent{}
	for i, n := range nodes {
		a := newSimAgent(cluster, n)
		a.preflightOnly, a.onExecute = preflightOnly, onExecute
		agents[n] = a
		go a.run(ctx, tc, i)
	}
	return agents
}

func newSimAgent(cluster, node string) *simAgent {
	return &simAgent{cluster: cluster, node: node, executed: map[string]int{}, results: map[string]api.OperationResult{}, upgradeOf: map[string]string{},
		agentVersion: version.Version}
}

func (a *simAgent) run(ctx context.Context, tc *testCluster, seed int) {
	registered := false
	var cred *agentCred
	for i := seed; ctx.Err() == nil; i++ {
		if cred == nil {
			// Through any live member: followers forward enrollment to
			// the leader, and a failure is retried on the next turn.
			live := tc.alive()
			if len(live) == 0 {
				continue
			}
			m := live[i%len(live)]
			c, err := enrollAgent(ctx, m.client(), m.addr, a.cluster, a.node)
			if err != nil {
				continue
			}
			cred = c
		}
		cl := tc.agentClient(i, cred)
		if !registered {
			if _, err := cl.Register(ctx, api.RegisterRequest{Cluster: a.cluster, Node: a.node, Address: a.node + ":7443", AgentVersion: a.version()}); err != nil {
				continue
			}
			registered = true
		}
		_ = cl.Heartbeat(ctx, api.AgentHealth{Cluster: a.cluster, Node: a.node, AgentVersion: a.version(), Kubelet: api.ComponentHealth{Healthy: true, Version: a.kubelet}, Containerd: api.ComponentHealth{Healthy: true}})
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := cl.Poll(pctx, a.cluster, a.node, time.Second)
		cancel()
		if err != nil {
			continue
		}
		a.mu.Lock()
		said := "-"
		if resp.Upgrade != nil {
			said = *resp.Upgrade
		}
		a.upgrades = append(a.upgrades, said)
		for _, op := range resp.Operations {
			a.upgradeOf[op.ID] = op.Upgrade
		}
		a.mu.Unlock()
		for _, op := range resp.Operations {
			if op.Validate() != nil {
				continue
			}
			if a.preflightOnly && op.CheckArtifacts == nil && op.ProbePeers == nil {
				continue
			}
			if a.silent != nil && a.silent(a.node, op) {
				continue
			}
			a.mu.Lock()
			res, done := a.results[op.ID]
			if !done {
				res = api.OperationResult{ID: op.ID, Kind: op.Kind, State: api.OpSucceeded, Message: "simulated", Details: agenttest.HealthyDetails(op)}
				if a.fail != nil {
					if msg := a.fail(a.node, op); msg != "" {
						res.State, res.Message = api.OpFailed, msg
					}
				}
				if op.EtcdSnapshot != nil && res.State == api.OpSucceeded {
					a.mu.Unlock()
					res = agenttest.Snapshot(ctx, cl, a.cluster, a.node, op, time.Now())
					a.mu.Lock()
				}
				if op.UpdateAgent != nil && res.State == api.OpSucceeded {
					a.agentVersion = op.UpdateAgent.Version
				}
				if op.UpdateAgent != nil {
					// The agent that runs after the update reports it.
					res.Details = map[string]string{api.DetailAgentVersion: a.agentVersion}
				}
				if op.CheckArtifacts == nil && op.ProbePeers == nil && op.EtcdSnapshot == nil {
					a.executed[op.ID]++ // count host changes only (a snapshot reads etcd, changes nothing)
					if a.onExecute != nil {
						a.onExecute(a.node, op)
					}
				}
				a.results[op.ID] = res
			}
			a.mu.Unlock()
			_ = cl.ReportResult(ctx, a.cluster, a.node, res)
		}
	}
}

func (a *simAgent) version() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.agentVersion
}

func (a *simAgent) executions() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for k, v := range a.executed {
		out[k] = v
	}
	return out
}

// Registration helpers.

const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// release is a catalog entry whose end of support is a year ahead of the
// wall clock the members run on: past it, the scheduler would force every
// cluster on that minor to the next, on a channel or not, which no test
// here expects of a fixed date.
func release(v string) api.Release {
	return api.Release{Version: v, EndOfSupport: time.Now().AddDate(1, 0, 0).UTC().Truncate(time.Hour), Channels: []string{"regular"},
		Components: api.ReleaseComponents{
			Kubelet:    api.BinaryArtifact{URL: "http://artifacts.test/kubelet-" + v, SHA256: sum},
			Containerd: api.BinaryArtifact{URL: "http://artifacts.test/containerd-" + v, SHA256: sum, Version: "1.7.0"},
			StaticPods: map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v" + v},
			// ConfigMaps: objects a real API server accepts and that are
			// rolled out once applied (kube_test.go applies them).
			Addons: []api.AddonManifest{
				{Name: "kube-proxy", YAML: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: molt-test-kube-proxy, namespace: kube-system}\ndata: {version: \"" + v + "\"}\n"},
				{Name: "coredns", YAML: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: molt-test-coredns, namespace: kube-system}\ndata: {version: \"" + v + "\"}\n"},
			},
		}}
}

func clusterSpec(name string, version string) api.ClusterSpec {
	return api.ClusterSpec{Kubeconfig: "apiVersion: v1\nkind: Config\n",
		Name: name, Kind: api.ClusterStandalone, Version: version,
		Pools: []api.Pool{
			{Name: "cplb", Role: api.RoleControlPlaneLB, Nodes: []api.Node{{Name: "cplb-1"}}},
			{Name: "cp", Role: api.RoleControlPlane, Nodes: []api.Node{{Name: "cp-1"}, {Name: "cp-2"}, {Name: "cp-3"}}},
			{Name: "lb", Role: api.RoleLoadBalancer, Nodes: []api.Node{{Name: "lb-1"}}},
			{Name: "workers", Role: api.RoleWorker, Nodes: []api.Node{{Name: "worker-1"}, {Name: "worker-2"}}},
		}}
}

// registerLab stores releases 1.33.6 and 1.34.4 and cluster "lab" at
// 1.33.6 (clusterSpec) through cl, and returns the cluster's spec.
func registerLab(t testing.TB, cl *client.Client) api.ClusterSpec {
	t.Helper()
	put(t, cl, "/v1/releases/1.33.6", release("1.33.6"))
	put(t, cl, "/v1/releases/1.34.4", release("1.34.4"))
	spec := clusterSpec("lab", "1.33.6")
	put(t, cl, "/v1/clusters/lab", spec)
	return spec
}

// upgradeLab registers cluster "lab" (registerLab) through the first
// member, runs agents for its nodes until the test ends and starts its
// upgrade to 1.34.4; it returns the member's client.
func upgradeLab(t *testing.T, tc *testCluster) *client.Client {
	t.Helper()
	cl := tc.members[0].client()
	spec := registerLab(t, cl)
	runAgents(t.Context(), tc, "lab", nodeNames(spec))
	waitAgents(t, tc, "lab", 7)
	_, err := cl.Do(t.Context(), http.MethodPost, "/v1/clusters/lab/upgrade", api.UpgradeRequest{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	return cl
}

// getUpgrade reads a cluster's upgrade through the API, as the engine's
// type: tests look its steps and nodes up with the engine's methods.
func getUpgrade(ctx context.Context, cl *client.Client, cluster string) (*phases.Upgrade, error) {
	var wire api.Upgrade
	if _, err := cl.Do(ctx, http.MethodGet, "/v1/clusters/"+cluster+"/upgrade", nil, &wire); err != nil {
		return nil, err
	}
	return convert.UpgradeFromAPI(&wire)
}

func nodeNames(spec api.ClusterSpec) []string {
	var out []string
	for _, p := range spec.Pools {
		for _, n := range p.Nodes {
			out = append(out, n.Name)
		}
	}
	return out
}

// put stores body at path. A 503 (no leader known, or the forward to it
// failed: an election in progress, which a loaded machine brings about in
// multi-member tests) is the API's "not now" and the PUT idempotent, so it
// is sent again until a leader answers; any other error fails the test.
func put(t testing.TB, cl *client.Client, path string, body any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var err error
	eventually(t, "a leader's answer to PUT "+path, func() bool {
		_, err = cl.Do(ctx, http.MethodPut, path, body, nil)
		return problemStatus(err) != http.StatusServiceUnavailable
	})
	require.NoError(t, err, "PUT %s", path)
}

var _ = raftstore.ErrNotLeader

// waitAgents waits until n agents of cluster are registered, healthy and
// seen by the leader, as an operator would before running a preflight.
func waitAgents(t testing.TB, tc *testCluster, cluster string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d agents of %s reporting", n, cluster), func() bool {
		l := tc.leader()
		if l == nil {
			return false
		}
		c, err := l.c.Cluster(cluster)
		if err != nil {
			return false
		}
		ok := 0
		for _, a := range c.Status.Agents {
			if a.Registered && a.Healthy && !a.Missing && !a.LastSeen.IsZero() {
				ok++
			}
		}
		return ok >= n
	})
}

// apiPorts hands out the loopback ports members' APIs listen on, from
// below the kernel's ephemeral range (ip_local_port_range, 32768–60999 by
// default). A member restarted on its old address (its address is in the
// replicated membership) must bind that port again; a port from the
// ephemeral range can meanwhile be the source port of any outgoing
// connection on the machine — another test's, a build's — and the restart
// then failed with "address already in use". Below the range, only a
// listener can take it, and this process takes each port once.
var apiPorts struct {
	sync.Mutex
	next int
}

const apiPortLow, apiPortHigh = 20000, 32767

// listenAPI listens on addr, or on the next free port of apiPorts when
// addr asks for any loopback port.
func listenAPI(addr string) (net.Listener, error) {
	if addr != "127.0.0.1:0" {
		return net.Listen("tcp", addr)
	}
	apiPorts.Lock()
	defer apiPorts.Unlock()
	if apiPorts.next == 0 {
		// A random start, so that two test processes at once (another
		// package's copy of this harness does not exist, but a second run
		// of this one may) rarely walk the same ports.
		apiPorts.next = apiPortLow + rand.IntN(apiPortHigh-apiPortLow)
	}
	var last error
	for range apiPortHigh - apiPortLow {
		p := apiPorts.next
		apiPorts.next++
		if apiPorts.next > apiPortHigh {
			apiPorts.next = apiPortLow
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err == nil {
			return ln, nil
		}
		last = err
	}
	return nil, fmt.Errorf("no free loopback port in %d–%d: %w", apiPortLow, apiPortHigh, last)
}
