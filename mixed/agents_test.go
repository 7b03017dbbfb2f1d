//go:build mixed

package mixed

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/internal/agenttest"
	"github.com/moltproject/molt/kube/kubetest"
	"github.com/moltproject/molt/trust"
)

// agents are simulated agents of one cluster's nodes over the members'
// HTTPS API, failing over between members as a real agent does: each
// enrolls with a bootstrap token, registers, beats and long-polls,
// answers preflight host checks at once, and carries out an upgrade
// operation once its node is let through (release) — the host's side
// being the kubelet's new version written to the node's status in the
// kube-apiserver, as the restarted kubelet would report it (the same
// simulation as coordinator/kube_test.go and web/browsertest's agents).
type agents struct {
	c       *coordinator
	cp      *kubetest.ControlPlane
	cluster string
	mu      sync.Mutex
	held    map[string]bool
	ran     map[string]int // upgrade operations carried out, by node
}

func startAgents(t *testing.T, c *coordinator, cp *kubetest.ControlPlane, cluster string, nodes []string) *agents {
	t.Helper()
	a := &agents{c: c, cp: cp, cluster: cluster, held: map[string]bool{}, ran: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var tok api.Token
	_, err := c.client().Do(ctx, http.MethodPost, "/v1/tokens", api.TokenRequest{Kind: api.TokenBootstrap, Cluster: cluster, Uses: len(nodes)}, &tok)
	require.NoError(t, err)
	for _, n := range nodes {
		a.held[n] = true
		cert := a.enroll(t, tok.Secret, n)
		wg.Add(1)
		go func() { defer wg.Done(); a.run(ctx, n, cert) }()
	}
	return a
}

func (a *agents) enroll(t *testing.T, bootstrap, node string) *tls.Certificate {
	t.Helper()
	key, err := trust.NewKey()
	require.NoError(t, err)
	csr, err := trust.NewCSR(trust.AgentIdentity(a.cluster, node), key)
	require.NoError(t, err)
	cl := client.NewEndpoints(a.c.endpoints(), a.c.hc)
	cl.SetBearerToken(bootstrap)
	var resp api.EnrollResponse
	_, err = cl.Do(context.Background(), http.MethodPost, "/v1/agents/enroll", api.EnrollRequest{Cluster: a.cluster, Node: node, CSR: string(csr)}, &resp)
	require.NoError(t, err)
	keyPEM, err := trust.EncodeKey(key)
	require.NoError(t, err)
	ca, err := trust.ParseCert([]byte(resp.CA))
	require.NoError(t, err)
	kp, err := trust.KeyPair([]byte(resp.Certificate), keyPEM, ca)
	require.NoError(t, err)
	return &kp
}

// release lets node's upgrade operations through.
func (a *agents) release(node string) {
	a.mu.Lock()
	a.held[node] = false
	a.mu.Unlock()
}

// ranOn is how many upgrade operations node's agent carried out.
func (a *agents) ranOn(node string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ran[node]
}

func (a *agents) run(ctx context.Context, node string, cert *tls.Certificate) {
	cl := client.NewEndpoints(a.c.endpoints(), a.c.httpClient(cert))
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
		_ = cl.Heartbeat(ctx, api.AgentHealth{Cluster: a.cluster, Node: node, Time: time.Now(),
			Kubelet: api.ComponentHealth{Healthy: true}, Containerd: api.ComponentHealth{Healthy: true}})
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ops, err := cl.PollOperations(pctx, a.cluster, node, time.Second)
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
					a.mu.Unlock()
					if op.UpgradeBinary != nil && op.UpgradeBinary.Component == api.ComponentKubelet {
						if err := a.kubeletAt(ctx, node, op.UpgradeBinary.Version); err != nil {
							continue // the node's status is written on the operation's next delivery
						}
					}
				}
				done[op.ID] = res
			}
			_ = cl.ReportResult(ctx, a.cluster, node, res)
		}
	}
}

// kubeletAt plays the restarted kubelet: the node reports version v.
func (a *agents) kubeletAt(ctx context.Context, node, v string) error {
	n, err := a.cp.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.Status.NodeInfo.KubeletVersion = v
	_, err = a.cp.Clientset.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
}

// testRelease is a catalog entry a real API server takes the add-ons of
// (ConfigMaps), as coordinator/kube_test.go's.
func testRelease(v string) api.Release {
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	return api.Release{Version: v, EndOfSupport: time.Now().AddDate(1, 0, 0).UTC().Truncate(time.Hour), Channels: []string{"regular"},
		Components: api.ReleaseComponents{
			Kubelet:    api.BinaryArtifact{URL: "http://artifacts.test/kubelet-" + v, SHA256: sum},
			Containerd: api.BinaryArtifact{URL: "http://artifacts.test/containerd-" + v, SHA256: sum, Version: "1.7.0"},
			StaticPods: map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v" + v},
			Addons: []api.AddonManifest{
				{Name: "kube-proxy", YAML: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: molt-test-kube-proxy, namespace: kube-system}\ndata: {version: \"" + v + "\"}\n"},
			},
		}}
}

// writeRelease is a release the writer puts: valid, and unique by key.
func writeRelease(key int) api.Release {
	r := testRelease("1.40." + strconv.Itoa(key))
	r.Components.Addons = nil
	r.Components.StaticPods = nil
	r.Channels = nil
	return r
}
