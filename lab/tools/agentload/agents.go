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
	node  string
	index int // its place in the fleet, which spreads its beats
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

// fleet is one worker's agents and what their beats measured.
type fleet struct {
	endpoints          []string          // the members' API URLs
	ca                 *x509.Certificate // the cluster CA
	token              string            // the bootstrap token's secret
	hc                 *http.Client      // the enrollments' client
	cluster            string
	agents             []*agent
	total              int // agents in every worker: beats spread over them
	interval, pollWait time.Duration

	cancel context.CancelFunc
	wg     sync.WaitGroup

	measuring atomic.Bool
	mu        sync.Mutex
	latencies map[int][]time.Duration // endpoint index → beats measured
	failed    atomic.Int64
	beats     atomic.Int64
	// retries counts enrollments and registrations tried again after a
	// failure (the members' refusals while the fleet arrives).
	retries atomic.Int64
	// registered, okBeats and badBeats count since the start, for the
	// progress lines; lastErr is the latest failure.
	registered, okBeats, badBeats atomic.Int64
	lastErr                       atomic.Pointer[string]
}

// newFleet makes the agents of spec's nodes; first is the first one's
// place in the whole fleet (its source address and beat phase).
func newFleet(spec workerSpec) (*fleet, error) {
	ca, err := trust.ParseCert([]byte(spec.CA))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	f := &fleet{endpoints: spec.Endpoints, ca: ca, token: spec.Token, cluster: spec.Cluster, total: spec.Total,
		interval: spec.Interval, pollWait: spec.PollWait, latencies: map[int][]time.Duration{},
		hc: &http.Client{Transport: client.ConfigureTransport(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})}}
	for j, n := range spec.Nodes {
		i := spec.First + j
		f.agents = append(f.agents, &agent{node: n, index: i, addr: net.IPv4(127, byte(1+i/62500), byte(i/250%250), byte(1+i%250))})
	}
	return f, nil
}

// noteErr keeps err as the latest failure.
func (f *fleet) noteErr(err error) {
	s := err.Error()
	f.lastErr.Store(&s)
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

// retry runs fn until it succeeds, as molt-agent retries enrollment and
// registration: with a jittered, doubling backoff from 500 ms to 10 s, so
// that a fleet refused at once does not come back in step. It gives up
// after attempts tries and returns the last error; retries counts every
// try after the first.
func (f *fleet) retry(ctx context.Context, attempts int, fn func() error) error {
	wait := 500 * time.Millisecond
	var err error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			f.retries.Add(1)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait/2 + rand.N(wait/2+1)):
			}
			wait = min(2*wait, 10*time.Second)
		}
		if err = fn(); err == nil {
			return nil
		}
		f.noteErr(err)
	}
	return err
}

// enrollOne enrolls agent a with its own key through the bootstrap token,
// as molt-agent does on its first start, and builds its client.
func (f *fleet) enrollOne(ctx context.Context, enroller *client.Client, pool *x509.CertPool, a *agent) error {
	key, err := trust.NewKey()
	if err != nil {
		return err
	}
	csr, err := trust.NewCSR(trust.AgentIdentity(f.cluster, a.node), key)
	if err != nil {
		return err
	}
	var resp api.EnrollResponse
	if err := f.retry(ctx, 8, func() error {
		_, err := enroller.Do(ctx, http.MethodPost, "/v1/agents/enroll", api.EnrollRequest{Cluster: f.cluster, Node: a.node, CSR: string(csr)}, &resp)
		return err
	}); err != nil {
		return fmt.Errorf("enroll %s: %w", a.node, err)
	}
	keyPEM, err := trust.EncodeKey(key)
	if err != nil {
		return err
	}
	if a.cert, err = trust.KeyPair([]byte(resp.Certificate), keyPEM, f.ca); err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{Certificates: []tls.Certificate{a.cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	a.tr = client.ConfigureTransport(tr)
	// After ConfigureTransport, which sets a dialer of its own: set before
	// it, the agent's source address was dropped and every agent dialled
	// from 127.0.0.1 again.
	a.tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: a.addr}, Timeout: client.DialTimeout, KeepAlive: 15 * time.Second}).DialContext
	a.client = client.NewEndpoints(f.endpoints, &http.Client{Transport: a.tr})
	a.client.SpreadBy(f.cluster + "/" + a.node)
	a.client.Observe(enroller.Seen()) // as molt-agent does after enrolling
	return nil
}

// start enrolls and registers every agent, 32 at a time, and starts each
// one's heartbeat and long-poll loops as soon as it is registered, as
// molt-agent does: an agent that registered early beats from then on
// rather than wait for the whole fleet (a fleet of 15,000 registering for
// two minutes with no beats had its first agents declared missing).
// Beats are spread over the interval by each agent's place in the fleet.
func (f *fleet) start(ctx context.Context) error {
	enroller := client.NewEndpoints(f.endpoints, f.hc)
	enroller.SetBearerToken(f.token)
	pool := x509.NewCertPool()
	pool.AddCert(f.ca)
	var loops context.Context
	loops, f.cancel = context.WithCancel(context.Background())
	begin := time.Now()
	return f.parallel(32, func(a *agent) error {
		if err := f.enrollOne(ctx, enroller, pool, a); err != nil {
			return err
		}
		if err := f.retry(ctx, 8, func() error {
			_, err := a.client.Register(ctx, api.RegisterRequest{Cluster: f.cluster, Node: a.node, AgentVersion: version.Version})
			return err
		}); err != nil {
			return fmt.Errorf("register %s: %w", a.node, err)
		}
		f.registered.Add(1)
		phase := time.Duration(int64(f.interval) * int64(a.index) / int64(f.total))
		offset := (phase - time.Since(begin)%f.interval + f.interval) % f.interval
		f.wg.Add(2)
		go func() { defer f.wg.Done(); f.beatLoop(loops, a, offset) }()
		go func() { defer f.wg.Done(); f.pollLoop(loops, a) }()
		return nil
	})
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
		if err != nil && ctx.Err() == nil {
			f.badBeats.Add(1)
			f.noteErr(err)
		} else if err == nil {
			f.okBeats.Add(1)
		}
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
	// After a failure, as molt-agent's main loop: a jittered wait from
	// 500 ms doubling to 30 s. A fixed second made every agent of a fleet
	// that lost its connections at once (a leader change under load) dial
	// all three members every second, a storm no member got out of.
	retry := 500 * time.Millisecond
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, f.pollWait+15*time.Second)
		_, err := a.client.Poll(pctx, f.cluster, a.node, f.pollWait)
		cancel()
		if err == nil {
			retry = 500 * time.Millisecond
			continue
		}
		if ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(retry/2 + rand.N(retry/2+1)):
			}
			retry = min(2*retry, 30*time.Second)
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
