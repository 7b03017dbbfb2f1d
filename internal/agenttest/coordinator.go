// Package agenttest is a stand-in for the coordinator's agent endpoints
// (enroll, renew, register, heartbeat, long-poll for operations, results),
// over TLS with a CA of its own, for tests of the agent on its own (package
// agent) and under systemd (package systemd). The coordinator's own tests
// use the real one.
package agenttest

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/trust"
)

// Coordinator serves the agent endpoints. Operations stay pending until a
// final result arrives, as the real coordinator re-delivers them.
type Coordinator struct {
	*httptest.Server
	mu         sync.Mutex
	pending    []api.Operation
	results    []api.OperationResult // final results, in arrival order
	heartbeats []api.AgentHealth
	registered int
	wake       chan struct{}
	artifacts  map[string][]byte
	// backups are the snapshots agents uploaded, by operation ID (the
	// first upload of an ID stands, as the coordinator records one);
	// uploads counts every upload request.
	backups map[string]Upload
	uploads int

	// CA signs agents' certificates; Token is the bootstrap token it
	// accepts; CertLifetime is how long the certificates it signs last.
	CA           *trust.CA
	Token        string
	CertLifetime time.Duration
	// Now is the stand-in's clock for signing (nil: the wall clock), set
	// to the agent's injected clock in rotation tests.
	Now func() time.Time
	// EnrollIndex, when set, is the state index an enrollment's answer
	// carries (api.IndexHeader), as a member's does (RegisterMinIndex).
	EnrollIndex      uint64
	registerMinIndex []string
	enrolled         int
	renewed          int
	clients          []string // client certificate names, one per request
}

// New starts a stand-in over TLS that enrolls agents presenting its
// bootstrap token (Token) and serves only agents with a certificate it
// signed; it stops when the test ends.
func New(t testing.TB) *Coordinator {
	ca, err := trust.NewCA("agenttest CA", time.Now())
	require.NoError(t, err)
	tok, _ := trust.NewToken(trust.BootstrapSecretLen)
	return newWith(t, ca, tok)
}

// Peer starts another stand-in with the same CA and token, as another
// member of the same coordinator.
func (f *Coordinator) Peer(t testing.TB) *Coordinator { return newWith(t, f.CA, f.Token) }

func newWith(t testing.TB, ca *trust.CA, tok string) *Coordinator {
	f := &Coordinator{wake: make(chan struct{}, 1), CA: ca, Token: tok, CertLifetime: time.Hour}
	mux := http.NewServeMux()
	sign := func(w http.ResponseWriter, csr, cluster, node string) {
		f.mu.Lock()
		life, now := f.CertLifetime, time.Now()
		if f.Now != nil {
			now = f.Now()
		}
		f.mu.Unlock()
		certPEM, cert, err := f.CA.SignAgent([]byte(csr), trust.AgentIdentity(cluster, node), now, life)
		if err != nil {
			problem(w, http.StatusForbidden, "csr-invalid")
			return
		}
		_ = json.NewEncoder(w).Encode(api.EnrollResponse{Certificate: string(certPEM), CA: string(f.CA.CertPEM), NotAfter: cert.NotAfter})
	}
	mux.HandleFunc("POST /v1/agents/enroll", func(w http.ResponseWriter, r *http.Request) {
		var req api.EnrollRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if r.Header.Get("Authorization") != "Bearer "+f.Token {
			problem(w, http.StatusUnauthorized, "token-unknown")
			return
		}
		f.mu.Lock()
		f.enrolled++
		if f.EnrollIndex > 0 {
			w.Header().Set(api.IndexHeader, strconv.FormatUint(f.EnrollIndex, 10))
		}
		f.mu.Unlock()
		sign(w, req.CSR, req.Cluster, req.Node)
	})
	mux.HandleFunc("POST /v1/agents/{c}/{n}/certificate", func(w http.ResponseWriter, r *http.Request) {
		var req api.RenewRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.renewed++
		f.mu.Unlock()
		sign(w, req.CSR, r.PathValue("c"), r.PathValue("n"))
	})
	mux.HandleFunc("POST /v1/agents/register", func(w http.ResponseWriter, r *http.Request) {
		var req api.RegisterRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		f.registered++
		f.registerMinIndex = append(f.registerMinIndex, r.Header.Get(api.MinIndexHeader))
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(api.RegisterResponse{Cluster: req.Cluster, Node: req.Node})
	})
	mux.HandleFunc("POST /v1/agents/{c}/{n}/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var h api.AgentHealth
		_ = json.NewDecoder(r.Body).Decode(&h)
		f.mu.Lock()
		f.heartbeats = append(f.heartbeats, h)
		f.mu.Unlock()
	})
	mux.HandleFunc("GET /v1/agents/{c}/{n}/operations", func(w http.ResponseWriter, r *http.Request) {
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait"))
		deadline := time.After(wait)
		for {
			f.mu.Lock()
			ops := append([]api.Operation(nil), f.pending...)
			f.mu.Unlock()
			if len(ops) > 0 {
				_ = json.NewEncoder(w).Encode(api.OperationsResponse{Operations: ops})
				return
			}
			select {
			case <-f.wake:
			case <-deadline:
				_ = json.NewEncoder(w).Encode(api.OperationsResponse{})
				return
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST /v1/agents/{c}/{n}/results", func(w http.ResponseWriter, r *http.Request) {
		var res api.OperationResult
		_ = json.NewDecoder(r.Body).Decode(&res)
		if res.State == api.OpRunning {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.results = append(f.results, res)
		for i, op := range f.pending {
			if op.ID == res.ID {
				f.pending = append(f.pending[:i], f.pending[i+1:]...)
				break
			}
		}
	})
	mux.HandleFunc("POST /v1/agents/{c}/{n}/backups", func(w http.ResponseWriter, r *http.Request) {
		var desc api.Backup
		if err := json.Unmarshal([]byte(r.Header.Get(api.BackupHeader)), &desc); err != nil {
			problem(w, http.StatusBadRequest, "backup-header")
			return
		}
		data, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		op := r.URL.Query().Get("operation")
		f.mu.Lock()
		defer f.mu.Unlock()
		f.uploads++
		if f.backups == nil {
			f.backups = map[string]Upload{}
		}
		up, ok := f.backups[op]
		if !ok {
			desc.ID, desc.Node, desc.Holder, desc.File = op, r.PathValue("n"), "stand-in", op
			up = Upload{Backup: desc, Data: data}
			f.backups[op] = up
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(up.Backup)
	})
	mux.HandleFunc("GET /artifacts/{name...}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		b, ok := f.artifacts[r.PathValue("name")]
		f.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Logf("fake coordinator: no route for %s %s", r.Method, r.URL.Path)
		http.NotFound(w, r)
	})
	// Agent routes need a client certificate the CA signed; enrollment
	// does not.
	guard := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/agents/enroll" && strings.HasPrefix(r.URL.Path, "/v1/agents/") {
			if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
				problem(w, http.StatusUnauthorized, "authentication-required")
				return
			}
			f.mu.Lock()
			c := r.TLS.VerifiedChains[0][0]
			f.clients = append(f.clients, fmt.Sprintf("%s %x", c.Subject.CommonName, c.SerialNumber.Bytes()))
			f.mu.Unlock()
		}
		mux.ServeHTTP(w, r)
	})
	f.Server = httptest.NewUnstartedServer(guard)
	// HTTP/2, as a member's API offers it.
	f.Server.EnableHTTP2 = true
	key, err := trust.NewKey()
	require.NoError(t, err)
	certPEM, err := ca.IssueMember("agenttest", []string{"127.0.0.1", "localhost"}, key.Public(), time.Now())
	require.NoError(t, err)
	keyPEM, err := trust.EncodeKey(key)
	require.NoError(t, err)
	kp, err := trust.KeyPair(certPEM, keyPEM, ca.Cert)
	require.NoError(t, err)
	f.Server.TLS = trust.ServerConfig(ca.Pool(), func() (*tls.Certificate, error) { return &kp, nil })
	// httptest fills Certificates when empty, and TLS prefers them to
	// GetCertificate for clients that send no server name.
	f.Server.TLS.Certificates = []tls.Certificate{kp}
	f.Server.TLS.Time = func() time.Time {
		f.mu.Lock()
		now := f.Now
		f.mu.Unlock()
		if now != nil {
			return now()
		}
		return time.Now()
	}
	f.Server.StartTLS()
	t.Cleanup(f.Close)
	return f
}

// SetClock makes the stand-in sign and verify certificates at now's time.
func (f *Coordinator) SetClock(now func() time.Time) { f.mu.Lock(); f.Now = now; f.mu.Unlock() }

// CAPin is the pin of the stand-in's CA.
func (f *Coordinator) CAPin() string { return f.CA.Pin() }

// RegisterMinIndex returns the api.MinIndexHeader of every registration,
// in order ("" for none).
func (f *Coordinator) RegisterMinIndex() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.registerMinIndex...)
}

// Enrolled and Renewed count enrollments and renewals.
func (f *Coordinator) Enrolled() int { f.mu.Lock(); defer f.mu.Unlock(); return f.enrolled }

// Renewed counts renewals.
func (f *Coordinator) Renewed() int { f.mu.Lock(); defer f.mu.Unlock(); return f.renewed }

// Clients are the client certificates of agent requests, one per request:
// "<common name> <serial in hex>".
func (f *Coordinator) Clients() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.clients...)
}

func problem(w http.ResponseWriter, status int, rule string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Problem{Type: api.ProblemTypeBase + "unauthorized", Status: status, Rule: rule, Detail: rule})
}

// ServeArtifact serves content at /artifacts/name, as a coordinator serves
// its artifact directory, and returns the path and sha256 a release uses.
func (f *Coordinator) ServeArtifact(name string, content []byte) (path, sum string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.artifacts == nil {
		f.artifacts = map[string][]byte{}
	}
	f.artifacts[name] = content
	h := sha256.Sum256(content)
	return "/artifacts/" + name, hex.EncodeToString(h[:])
}

// Enqueue offers operations to the agent.
func (f *Coordinator) Enqueue(ops ...api.Operation) {
	f.mu.Lock()
	f.pending = append(f.pending, ops...)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// ResultsFor returns the final results received for id.
func (f *Coordinator) ResultsFor(id string) []api.OperationResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.OperationResult
	for _, r := range f.results {
		if r.ID == id {
			out = append(out, r)
		}
	}
	return out
}

// WaitResult polls until a final result for id arrived and returns the
// latest one.
func (f *Coordinator) WaitResult(t testing.TB, id string, within time.Duration) api.OperationResult {
	t.Helper()
	var res api.OperationResult
	require.Eventually(t, func() bool {
		rs := f.ResultsFor(id)
		if len(rs) == 0 {
			return false
		}
		res = rs[len(rs)-1]
		return true
	}, within, 10*time.Millisecond, "no result for %s", id)
	return res
}

// Heartbeats returns the heartbeats received so far.
func (f *Coordinator) Heartbeats() []api.AgentHealth {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.AgentHealth(nil), f.heartbeats...)
}

// Registered counts registrations.
func (f *Coordinator) Registered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.registered
}

// Upload is a snapshot an agent uploaded: its description as recorded and
// its bytes.
type Upload struct {
	Backup api.Backup
	Data   []byte
}

// Backup returns the snapshot uploaded for operation op, and the number
// of upload requests so far.
func (f *Coordinator) Backup(op string) (Upload, bool, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.backups[op]
	return u, ok, f.uploads
}
