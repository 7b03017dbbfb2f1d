package coordinator_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator/statemachine"
	"github.com/moltproject/molt/raftstore"
	"github.com/moltproject/molt/seal"
	"github.com/moltproject/molt/trust"
)

// Trust material shared by every member the tests start: one cluster CA,
// one bootstrap admin token, one encryption key ring, as a coordinator's
// members share them.
var (
	testTrustOnce sync.Once
	testCA        *trust.CA
	testAdmin     string // the admin token
	testAdminRec  *statemachine.TokenRecord
	testKeyring   *seal.Keyring
)

func testTrust(t testing.TB) {
	testTrustOnce.Do(func() {
		var err error
		testCA, err = trust.NewCA("molt test CA", time.Now())
		if err != nil {
			panic(err)
		}
		tok, id := trust.NewToken(trust.APISecretLen)
		_, secret, _ := trust.ParseToken(tok)
		testAdmin = tok
		testAdminRec = &statemachine.TokenRecord{ID: id, Kind: statemachine.TokenKindAPI, SecretHash: trust.HashSecret(secret), Role: "admin", Description: "bootstrap admin", CreatedBy: "bootstrap"}
		if testKeyring, err = seal.NewKeyring(seal.GenerateKey()); err != nil {
			panic(err)
		}
	})
}

// memberCert issues a member certificate for loopback.
func memberCert(t testing.TB, id string) *tls.Certificate {
	t.Helper()
	testTrust(t)
	key, err := trust.NewKey()
	require.NoError(t, err)
	certPEM, err := testCA.IssueMember(id, []string{"127.0.0.1", "localhost"}, key.Public(), time.Now())
	require.NoError(t, err)
	keyPEM, err := trust.EncodeKey(key)
	require.NoError(t, err)
	kp, err := trust.KeyPair(certPEM, keyPEM, testCA.Cert)
	require.NoError(t, err)
	return &kp
}

func raftTLS(cert *tls.Certificate) *raftstore.TLSConfig {
	get := func() (*tls.Certificate, error) { return cert, nil }
	srv := trust.ServerConfig(testCA.Pool(), get)
	srv.ClientAuth = tls.RequireAndVerifyClientCert
	return &raftstore.TLSConfig{Server: srv, Client: trust.ClientConfig(testCA.Pool(), get)}
}

// tlsListen wraps a listener in the member's REST TLS.
// It offers HTTP/2 as a member's API does (cmd/molt-coordinator).
func tlsListen(ln net.Listener, cert *tls.Certificate) net.Listener {
	cfg := trust.ServerConfig(testCA.Pool(), func() (*tls.Certificate, error) { return cert, nil })
	cfg.NextProtos = client.ServerProtocols
	return tls.NewListener(ln, cfg)
}

// httpsClient is an HTTP client that trusts the test CA and presents cert
// (nil: none).
func httpsClient(cert *tls.Certificate) *http.Client {
	var get func() (*tls.Certificate, error)
	if cert != nil {
		get = func() (*tls.Certificate, error) { return cert, nil }
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: trust.ClientConfig(testCA.Pool(), get), MaxIdleConnsPerHost: 16}}
}

// adminClient is an API client of the member at addr with the admin token.
func adminClient(addr string) *client.Client {
	cl := client.New("https://"+addr, httpsClient(nil))
	cl.SetBearerToken(testAdmin)
	return cl
}

// agentCred is an enrolled agent's certificate, with a client per member
// address.
type agentCred struct {
	cert *tls.Certificate
	// perRequest opens a connection for every request (resuming the TLS
	// session): 15,000 agents' kept connections, both ends in one test
	// process, would need more open files than this machine allows.
	perRequest bool
	mu         sync.Mutex
	clients    map[string]*client.Client
}

func (a *agentCred) client(addr string) *client.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.clients == nil {
		a.clients = map[string]*client.Client{}
	}
	c, ok := a.clients[addr]
	if !ok {
		hc := httpsClient(a.cert)
		if a.perRequest {
			tr := hc.Transport.(*http.Transport)
			tr.DisableKeepAlives = true
			tr.TLSClientConfig.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		}
		c = client.New("https://"+addr, hc)
		a.clients[addr] = c
	}
	return c
}

// enrollAgent enrolls cluster/node as a real agent does: a bootstrap token
// from an admin, a key and CSR, the certificate from the coordinator.
func enrollAgent(ctx context.Context, admin *client.Client, enrollAt string, cluster, node string) (*agentCred, error) {
	var tok api.Token
	if _, err := admin.Do(ctx, http.MethodPost, "/v1/tokens", api.TokenRequest{Kind: api.TokenBootstrap, Cluster: cluster}, &tok); err != nil {
		return nil, err
	}
	key, err := trust.NewKey()
	if err != nil {
		return nil, err
	}
	csr, err := trust.NewCSR(trust.AgentIdentity(cluster, node), key)
	if err != nil {
		return nil, err
	}
	cl := client.New("https://"+enrollAt, httpsClient(nil))
	cl.SetBearerToken(tok.Secret)
	var resp api.EnrollResponse
	if _, err := cl.Do(ctx, http.MethodPost, "/v1/agents/enroll", api.EnrollRequest{Cluster: cluster, Node: node, CSR: string(csr)}, &resp); err != nil {
		return nil, err
	}
	keyPEM, err := trust.EncodeKey(key)
	if err != nil {
		return nil, err
	}
	kp, err := trust.KeyPair([]byte(resp.Certificate), keyPEM, testCA.Cert)
	if err != nil {
		return nil, err
	}
	return &agentCred{cert: &kp}, nil
}

// enrollMany enrolls every node of a cluster through one bootstrap token,
// in parallel. Their clients open a connection per request (agentCred).
func enrollMany(tb testing.TB, m *member, cluster string, nodes []string) map[string]*agentCred {
	tb.Helper()
	ctx := context.Background()
	var tok api.Token
	_, err := m.client().Do(ctx, http.MethodPost, "/v1/tokens", api.TokenRequest{Kind: api.TokenBootstrap, Cluster: cluster, Uses: len(nodes)}, &tok)
	require.NoError(tb, err)
	enroller := client.New("https://"+m.addr, httpsClient(nil))
	enroller.SetBearerToken(tok.Secret)
	out := make(map[string]*agentCred, len(nodes))
	var mu sync.Mutex
	parallel(nodes, 32, func(node string) {
		key, err := trust.NewKey()
		require.NoError(tb, err)
		csr, err := trust.NewCSR(trust.AgentIdentity(cluster, node), key)
		require.NoError(tb, err)
		var resp api.EnrollResponse
		_, err = enroller.Do(ctx, http.MethodPost, "/v1/agents/enroll", api.EnrollRequest{Cluster: cluster, Node: node, CSR: string(csr)}, &resp)
		require.NoError(tb, err)
		keyPEM, _ := trust.EncodeKey(key)
		kp, err := trust.KeyPair([]byte(resp.Certificate), keyPEM, testCA.Cert)
		require.NoError(tb, err)
		mu.Lock()
		out[node] = &agentCred{cert: &kp, perRequest: true}
		mu.Unlock()
	})
	return out
}
