package browsertest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
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
	"github.com/moltproject/molt/coordinator/httpapi"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/internal/agenttest"
	"github.com/moltproject/molt/internal/testlog"
	"github.com/moltproject/molt/internal/version"
	"github.com/moltproject/molt/phases"
	"github.com/moltproject/molt/preflight"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/seal"
	"github.com/moltproject/molt/trust"
)

// eventually polls cond every 10 ms until it holds, for at most a minute.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, time.Minute, 10*time.Millisecond, "timed out waiting for %s", what)
}

// member is one coordinator member on loopback, its API over HTTPS from
// a CA of its own, with an admin token.
type member struct {
	addr  string
	c     *coordinator.Coordinator
	ca    *trust.CA
	cert  *tls.Certificate
	admin string
	ops   *clusterOps
}

func startMember(t testing.TB, mutate ...func(*coordinator.Config)) *member {
	t.Helper()
	ca, err := trust.NewCA("browsertest CA", time.Now())
	require.NoError(t, err)
	tok, id := trust.NewToken(trust.APISecretLen)
	_, secret, _ := trust.ParseToken(tok)
	keys, err := seal.NewKeyring(seal.GenerateKey())
	require.NoError(t, err)
	cert := memberCert(t, ca, "m1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	m := &member{addr: ln.Addr().String(), ca: ca, cert: cert, admin: tok, ops: &clusterOps{}}

	cfg := coordinator.DefaultConfig()
	cfg.Raft.NodeID = "m1"
	cfg.Raft.RaftAddr = "127.0.0.1:0"
	cfg.Raft.HTTPAddr = m.addr
	cfg.Raft.DataDir = t.TempDir()
	cfg.Raft.Bootstrap = true
	cfg.Raft.HeartbeatTimeout = 500 * time.Millisecond
	cfg.Raft.ElectionTimeout = 500 * time.Millisecond
	cfg.Raft.LeaderLeaseTimeout = 250 * time.Millisecond
	cfg.Raft.CommitTimeout = 5 * time.Millisecond
	get := func() (*tls.Certificate, error) { return cert, nil }
	srvTLS := trust.ServerConfig(ca.Pool(), get)
	srvTLS.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.Raft.TLS = &raftstore.TLSConfig{Server: srvTLS, Client: trust.ClientConfig(ca.Pool(), get)}
	cfg.TickInterval = 50 * time.Millisecond
	cfg.RetryBackoff = 10 * time.Millisecond
	cfg.CA = ca
	cfg.BootstrapAdmin = &statemachine.TokenRecord{ID: id, Kind: statemachine.TokenKindAPI, SecretHash: trust.HashSecret(secret), Role: "admin", Description: "bootstrap admin", CreatedBy: "bootstrap"}
	cfg.Keyring = keys
	cfg.Connector = m.ops
	cfg.Logger = testlog.New(t)
	for _, f := range mutate {
		f(&cfg)
	}
	m.c, err = coordinator.New(cfg)
	require.NoError(t, err)
	srv := httpapi.NewServer(httpapi.New(httpapi.ServicesOf(m.c), httpapi.Config{Logger: cfg.Logger, MaxPoll: 2 * time.Second}))
	srv.ErrorLog = log.New(io.Discard, "", 0) // the browser's closed probe connections
	go func() { _ = srv.Serve(tls.NewListener(ln, trust.ServerConfig(ca.Pool(), get))) }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = m.c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		defer scancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
		_ = m.c.Close()
	})
	eventually(t, "the bootstrap admin token stored", func() bool { _, err := m.c.AuthenticateToken(tok); return err == nil })
	return m
}

func memberCert(t testing.TB, ca *trust.CA, id string) *tls.Certificate {
	t.Helper()
	key, err := trust.NewKey()
	require.NoError(t, err)
	certPEM, err := ca.IssueMember(id, []string{"127.0.0.1", "localhost"}, key.Public(), time.Now())
	require.NoError(t, err)
	keyPEM, err := trust.EncodeKey(key)
	require.NoError(t, err)
	kp, err := trust.KeyPair(certPEM, keyPEM, ca.Cert)
	require.NoError(t, err)
	return &kp
}

// httpsClient trusts the member's CA and presents cert (nil: none).
func (m *member) httpsClient(cert *tls.Certificate) *http.Client {
	var get func() (*tls.Certificate, error)
	if cert != nil {
		get = func() (*tls.Certificate, error) { return cert, nil }
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: trust.ClientConfig(m.ca.Pool(), get)}}
}

// client is an API client of the member with token (the admin's when empty).
func (m *member) client(token string) *client.Client {
	cl := client.New("https://"+m.addr, m.httpsClient(nil))
	if token == "" {
		token = m.admin
	}
	cl.SetBearerToken(token)
	return cl
}

func (m *member) do(t testing.TB, method, path string, in, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := m.client("").Do(ctx, method, path, in, out)
	require.NoError(t, err, "%s %s", method, path)
}

// token makes an API token with role.
func (m *member) token(t testing.TB, role string) string {
	var tok api.Token
	m.do(t, http.MethodPost, "/v1/tokens", api.TokenRequest{Kind: api.TokenAPI, Role: role, Description: role + " in the browser"}, &tok)
	return tok.Secret
}

// clusterOps stands in for the clusters' API servers: every call succeeds
// at once. The agents are what the tests hold and release.
type clusterOps struct{}

func (o *clusterOps) Connect(string, []byte) (coordinator.ClusterOps, error) { return o, nil }
func (*clusterOps) Cordon(context.Context, string) error                     { return nil }
func (*clusterOps) Drain(context.Context, string, coordinator.DrainOptions) (coordinator.Drained, error) {
	return coordinator.Drained{}, nil
}
func (*clusterOps) NodeReady(context.Context, string, string) error         { return nil }
func (*clusterOps) WorkloadsReady(context.Context, []phases.Workload) error { return nil }
func (*clusterOps) WaitReady(context.Context, string, string) error         { return nil }
func (*clusterOps) WaitServing(context.Context, string) error               { return nil }
func (*clusterOps) Uncordon(context.Context, string) error                  { return nil }
func (*clusterOps) ProtectedUntil(context.Context, string, time.Time) (coordinator.ProtectedInfo, error) {
	return coordinator.ProtectedInfo{}, nil
}
func (*clusterOps) ApplyAddons(context.Context, phases.Version, []api.AddonManifest) error {
	return nil
}
func (*clusterOps) Health(context.Context, phases.Version, []string) error { return nil }
func (*clusterOps) PreflightReader() preflight.ClusterReader               { return healthy{} }
func (*clusterOps) DeletePods(context.Context, string) ([]phases.LeftPod, error) {
	return nil, nil
}
func (*clusterOps) DeleteNode(context.Context, string) error     { return nil }
func (*clusterOps) FreezeBlueNode(context.Context, string) error { return nil }
func (*clusterOps) ThawBlueNode(context.Context, string) error   { return nil }

type healthy struct{}

func (healthy) Nodes(_ context.Context, nodes []string) (map[string]preflight.NodeInfo, error) {
	out := map[string]preflight.NodeInfo{}
	for _, n := range nodes {
		out[n] = preflight.NodeInfo{Ready: true}
	}
	return out, nil
}
func (healthy) ControlPlane(context.Context) (preflight.ControlPlaneHealth, error) {
	return preflight.ParseReadyz(200, "[+]ping ok\n[+]etcd ok\nreadyz check passed"), nil
}
func (healthy) BlockingPDBs(context.Context, []string) ([]preflight.PDBInfo, error) { return nil, nil }
func (healthy) DeprecatedAPIs(context.Context) ([]preflight.DeprecatedAPI, error)   { return nil, nil }
func (healthy) ProtectedPods(context.Context, []string, time.Time) ([]preflight.ProtectedPod, error) {
	return nil, nil
}

// agents are simulated agents of one cluster's nodes over the member's
// HTTPS API: each enrolls with a bootstrap token, registers, beats and
// long-polls, answers preflight host checks at once and carries out an
// upgrade operation only while its node is not held.
type agents struct {
	m       *member
	cluster string
	// kubelet is the kubelet version the agents report ("": none).
	kubelet string
	mu      sync.Mutex
	held    map[string]bool
	failing map[string]bool // the node's next upgrade operation fails
	ran     map[string]int  // upgrade operations carried out, by node
}

func startAgents(t testing.TB, m *member, cluster string, nodes []string, held bool) *agents {
	t.Helper()
	return startAgentsAt(t, m, cluster, nodes, held, "")
}

// startAgentsAt starts agents that report their kubelet at version
// kubelet ("v1.34.4"): those of instances a MIG pool's upgrade created,
// which their template starts at the release, and which the coordinator
// waits for before it counts the instance upgraded.
func startAgentsAt(t testing.TB, m *member, cluster string, nodes []string, held bool, kubelet string) *agents {
	t.Helper()
	a := &agents{m: m, cluster: cluster, kubelet: kubelet, held: map[string]bool{}, failing: map[string]bool{}, ran: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var tok api.Token
	m.do(t, http.MethodPost, "/v1/tokens", api.TokenRequest{Kind: api.TokenBootstrap, Cluster: cluster, Uses: len(nodes)}, &tok)
	for _, n := range nodes {
		a.held[n] = held
		cert := a.enroll(t, tok.Secret, n)
		wg.Add(1)
		go func() { defer wg.Done(); a.run(ctx, n, cert) }()
	}
	eventually(t, "agents registered", func() bool {
		c, err := m.c.Cluster(cluster)
		if err != nil {
			return false
		}
		ok := 0
		for _, s := range c.Status.Agents {
			if slices.Contains(nodes, s.Node) && s.Registered && !s.Missing && s.Healthy {
				ok++
			}
		}
		return ok == len(nodes)
	})
	return a
}

func (a *agents) enroll(t testing.TB, bootstrap, node string) *tls.Certificate {
	t.Helper()
	key, err := trust.NewKey()
	require.NoError(t, err)
	csr, err := trust.NewCSR(trust.AgentIdentity(a.cluster, node), key)
	require.NoError(t, err)
	cl := client.New("https://"+a.m.addr, a.m.httpsClient(nil))
	cl.SetBearerToken(bootstrap)
	var resp api.EnrollResponse
	_, err = cl.Do(context.Background(), http.MethodPost, "/v1/agents/enroll", api.EnrollRequest{Cluster: a.cluster, Node: node, CSR: string(csr)}, &resp)
	require.NoError(t, err)
	keyPEM, err := trust.EncodeKey(key)
	require.NoError(t, err)
	kp, err := trust.KeyPair([]byte(resp.Certificate), keyPEM, a.m.ca.Cert)
	require.NoError(t, err)
	return &kp
}

// release lets nodes' upgrade operations through.
func (a *agents) release(nodes ...string) { a.set(false, nodes) }

// failNext makes node's next upgrade operation fail.
func (a *agents) failNext(node string) {
	a.mu.Lock()
	a.failing[node] = true
	a.mu.Unlock()
}

func (a *agents) set(held bool, nodes []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range nodes {
		a.held[n] = held
	}
}

func (a *agents) run(ctx context.Context, node string, cert *tls.Certificate) {
	cl := client.New("https://"+a.m.addr, a.m.httpsClient(cert))
	registered := false
	done := map[string]api.OperationResult{}
	for ctx.Err() == nil {
		if !registered {
			if _, err := cl.Register(ctx, api.RegisterRequest{Cluster: a.cluster, Node: node, Address: node + ":7443"}); err != nil {
				pause(ctx)
				continue
			}
			registered = true
		}
		_ = cl.Heartbeat(ctx, api.AgentHealth{Cluster: a.cluster, Node: node, Time: time.Now(), AgentVersion: version.Version,
			Kubelet: api.ComponentHealth{Healthy: true, Version: a.kubelet}, Containerd: api.ComponentHealth{Healthy: true}})
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ops, err := cl.PollOperations(pctx, a.cluster, node, 500*time.Millisecond)
		cancel()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				pause(ctx)
			}
			continue
		}
		for _, op := range ops {
			// A snapshot changes nothing on the host: answered like a check.
			check := op.CheckArtifacts != nil || op.ProbePeers != nil || op.EtcdSnapshot != nil
			a.mu.Lock()
			held := a.held[node]
			a.mu.Unlock()
			if !check && held {
				continue
			}
			res, ok := done[op.ID]
			if !ok {
				res = api.OperationResult{ID: op.ID, Kind: op.Kind, State: api.OpSucceeded, Message: "simulated", Details: agenttest.HealthyDetails(op)}
				if op.EtcdSnapshot != nil {
					res = agenttest.Snapshot(ctx, cl, a.cluster, node, op, time.Now())
				}
				if !check {
					a.mu.Lock()
					a.ran[node]++
					if a.failing[node] {
						a.failing[node] = false
						res.State, res.Message = api.OpFailed, "simulated: kubelet did not come back healthy"
					}
					a.mu.Unlock()
				}
				if res.State == api.OpSucceeded {
					done[op.ID] = res // a failed attempt is retried under a new ID
				}
			}
			_ = cl.ReportResult(ctx, a.cluster, node, res)
		}
	}
}

func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(50 * time.Millisecond):
	}
}

const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func release(v string) api.Release {
	return api.Release{Version: v, EndOfSupport: time.Now().AddDate(1, 0, 0).UTC().Truncate(time.Hour), Channels: []string{"regular"},
		Components: api.ReleaseComponents{
			Kubelet:    api.BinaryArtifact{URL: "http://artifacts.test/kubelet-" + v, SHA256: sum},
			Containerd: api.BinaryArtifact{URL: "http://artifacts.test/containerd-" + v, SHA256: sum, Version: "1.7.0"},
			StaticPods: map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v" + v},
		}}
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

func fmtNodes(prefix string, n int) []api.Node {
	out := make([]api.Node, n)
	for i := range out {
		out[i] = api.Node{Name: fmt.Sprintf("%s-%d", prefix, i+1)}
	}
	return out
}
