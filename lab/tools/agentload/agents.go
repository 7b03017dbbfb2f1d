package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/internal/version"
	"github.com/moltproject/molt/trust"
)

// agent is one simulated molt-agent: its certificate, its own HTTP/2
// connection (its own transport), its client spread by its name.
type agent struct {
	node string
	// addr is the agent's own source address in 127.0.0.0/8: the members
	// bound handshakes in progress per remote address (internal/tlsaccept,
	// 16), as they should for a fleet whose hosts each have one, so 15,000
	// agents dialling from 127.0.0.1 alone had their new connections
	// closed (EOF) while many were being set up.
	addr   net.IP
	cert   tls.Certificate
	tr     *http.Transport
	client *client.Client
}

// fleet is every agent and what their beats measured.
type fleet struct {
	co                 *coordinator
	cluster            string
	agents             []*agent
	interval, pollWait time.Duration

	cancel context.CancelFunc
	wg     sync.WaitGroup

	measuring atomic.Bool
	mu        sync.Mutex
	latencies map[int][]time.Duration // endpoint index → beats measured
	failed    atomic.Int64
	beats     atomic.Int64
}

func newFleet(co *coordinator, cluster string, nodes []string, interval, pollWait time.Duration) *fleet {
	f := &fleet{co: co, cluster: cluster, interval: interval, pollWait: pollWait, latencies: map[int][]time.Duration{}}
	for i, n := range nodes {
		f.agents = append(f.agents, &agent{node: n, addr: net.IPv4(127, byte(1+i/62500), byte(i/250%250), byte(1+i%250))})
	}
	return f
}

// parallel runs fn for every agent, at most n at a time, and returns the
// first error.
func (f *fleet) parallel(n int, fn func(*agent) error) error {
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for _, a := range f.agents {
		if first.Load() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(a); err != nil {
				first.CompareAndSwap(nil, &err)
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// enroll enrolls every agent with its own key through one bootstrap
// token, as molt-agent does on its first start.
func (f *fleet) enroll(ctx context.Context) error {
	secret, err := f.co.bootstrapToken(ctx, f.cluster, len(f.agents))
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	enroller := client.NewEndpoints(f.co.endpoints(), f.co.hc)
	enroller.SetBearerToken(secret)
	pool := x509.NewCertPool()
	pool.AddCert(f.co.ca)
	return f.parallel(32, func(a *agent) error {
		key, err := trust.NewKey()
		if err != nil {
			return err
		}
		csr, err := trust.NewCSR(trust.AgentIdentity(f.cluster, a.node), key)
		if err != nil {
			return err
		}
		var resp api.EnrollResponse
		if _, err := enroller.Do(ctx, http.MethodPost, "/v1/agents/enroll", api.EnrollRequest{Cluster: f.cluster, Node: a.node, CSR: string(csr)}, &resp); err != nil {
			return fmt.Errorf("enroll %s: %w", a.node, err)
		}
		keyPEM, err := trust.EncodeKey(key)
		if err != nil {
			return err
		}
		if a.cert, err = trust.KeyPair([]byte(resp.Certificate), keyPEM, f.co.ca); err != nil {
			return err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: a.addr}, Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		tr.TLSClientConfig = &tls.Config{Certificates: []tls.Certificate{a.cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
		a.tr = client.ConfigureTransport(tr)
		a.client = client.NewEndpoints(f.co.endpoints(), &http.Client{Transport: a.tr})
		a.client.SpreadBy(f.cluster + "/" + a.node)
		return nil
	})
}

// start registers every agent, then runs each one's heartbeat and long
// poll loops until stop. Beats are spread evenly over the interval.
func (f *fleet) start(ctx context.Context) error {
	if err := f.parallel(32, func(a *agent) error {
		_, err := a.client.Register(ctx, api.RegisterRequest{Cluster: f.cluster, Node: a.node, AgentVersion: version.Version})
		if err != nil {
			return fmt.Errorf("register %s: %w", a.node, err)
		}
		return nil
	}); err != nil {
		return err
	}
	ctx, f.cancel = context.WithCancel(context.Background())
	for i, a := range f.agents {
		offset := time.Duration(int64(f.interval) * int64(i) / int64(len(f.agents)))
		f.wg.Add(2)
		go func() { defer f.wg.Done(); f.beatLoop(ctx, a, offset) }()
		go func() { defer f.wg.Done(); f.pollLoop(ctx, a) }()
	}
	return nil
}

// beatLoop beats every interval from offset on, as molt-agent's
// heartbeat loop does, with a health that does not change (so no beat
// should write a Raft entry).
func (f *fleet) beatLoop(ctx context.Context, a *agent, offset time.Duration) {
	t := time.NewTimer(offset)
	defer t.Stop()
	h := api.AgentHealth{Cluster: f.cluster, Node: a.node, AgentVersion: version.Version,
		Kubelet: api.ComponentHealth{Healthy: true, Version: "v1.33.6"}, Containerd: api.ComponentHealth{Healthy: true, Version: "1.7.0"}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(f.interval)
		h.Time = time.Now().UTC()
		start := time.Now()
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := a.client.Heartbeat(bctx, h)
		cancel()
		took := time.Since(start)
		if !f.measuring.Load() || ctx.Err() != nil {
			continue
		}
		f.beats.Add(1)
		if err != nil {
			f.failed.Add(1)
			continue
		}
		f.mu.Lock()
		f.latencies[a.client.Current()] = append(f.latencies[a.client.Current()], took)
		f.mu.Unlock()
	}
}

// pollLoop long-polls for operations, as molt-agent does; the answers
// are empty (no upgrade runs).
func (f *fleet) pollLoop(ctx context.Context, a *agent) {
	// Start the polls spread over a poll's wait, not all at once.
	select {
	case <-ctx.Done():
		return
	case <-time.After(rand.N(f.pollWait)):
	}
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, f.pollWait+15*time.Second)
		_, err := a.client.Poll(pctx, f.cluster, a.node, f.pollWait)
		cancel()
		if err != nil && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// measure starts (true) or ends (false) the measured window.
func (f *fleet) measure(on bool) { f.measuring.Store(on) }

// stop ends every agent's loops and closes its connection.
func (f *fleet) stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	for _, a := range f.agents {
		if a.tr != nil {
			a.tr.CloseIdleConnections()
		}
	}
}
