package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sort"
	"strings"
	"sync"
	"time"
)

// A workload probe measures what a cluster's users feel during an upgrade:
// it sends GET requests at a steady rate, each on a new connection (so a
// request whose pod went away fails rather than hiding behind a kept-alive
// connection), and records every failure with its time.

// ProbeConfig says what to ask and how often.
type ProbeConfig struct {
	// Name labels the probe in reports ("service", "load balancer").
	Name string
	// URL is asked with GET; a 2xx answer whose body contains Expect passes.
	URL    string
	Expect string
	// Rate is requests per second (default 20).
	Rate int
	// Timeout bounds one request (default 2 s).
	Timeout time.Duration
	// Transport dials and resolves (e.g. inside a lab host's namespace).
	// It should not keep connections alive.
	Transport http.RoundTripper
	// OnResult, when set, is told of every request's outcome as it ends
	// (the lab's Prometheus counts them).
	OnResult func(passed bool)
}

// ProbeFailure is one failed request.
type ProbeFailure struct {
	At  time.Time
	Err string
}

// ProbeReport is a probe's result.
type ProbeReport struct {
	Name   string
	Sent   int
	Failed int
	// LongestOutage is the longest time from a failed request to the next
	// request that passed (a run of failures counts once).
	LongestOutage time.Duration
	// LongestOutageFrom is when the longest outage began (its first failed
	// request), so that it can be placed against the upgrade's steps.
	LongestOutageFrom time.Time
	// Failures are the failed requests in the order they were sent (at
	// most maxFailuresKept; Failed counts all).
	Failures []ProbeFailure
	// Outages are the runs of failures, in order (at most
	// maxFailuresKept), so each can be laid against what the cluster did.
	Outages []ProbeOutage
}

// ProbeOutage is one run of failed requests: From the first failure's
// send time To the next passing request's (or the run's last failure).
type ProbeOutage struct {
	From, To time.Time
	Failed   int
}

const maxFailuresKept = 200

// String is the one-line summary the demo and the e2e test print.
func (r ProbeReport) String() string {
	s := fmt.Sprintf("%s: %d requests, %d failed, longest outage %s", r.Name, r.Sent, r.Failed, r.LongestOutage.Round(time.Millisecond))
	if !r.LongestOutageFrom.IsZero() {
		s += " from " + r.LongestOutageFrom.UTC().Format("15:04:05.000")
	}
	if r.Failed > 0 {
		var first []string
		for i, f := range r.Failures {
			if i == 3 {
				break
			}
			first = append(first, f.At.UTC().Format("15:04:05.000")+" "+f.Err)
		}
		s += " (first: " + strings.Join(first, "; ") + ")"
	}
	return s
}

// probeResult is one request's outcome, by the time it was sent.
type probeResult struct {
	at  time.Time
	err string
}

// Probe runs until Stop.
type Probe struct {
	cfg    ProbeConfig
	client *http.Client
	cancel context.CancelFunc
	done   chan struct{}
	wg     sync.WaitGroup

	mu      sync.Mutex
	results []probeResult
}

// StartProbe starts sending requests; Stop ends it and reports.
func StartProbe(ctx context.Context, cfg ProbeConfig) *Probe {
	if cfg.Rate <= 0 {
		cfg.Rate = 20
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Probe{cfg: cfg, cancel: cancel, done: make(chan struct{}),
		client: &http.Client{Timeout: cfg.Timeout, Transport: cfg.Transport}}
	go p.run(ctx)
	return p
}

func (p *Probe) run(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(time.Second / time.Duration(p.cfg.Rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			// Each request in its own goroutine: a slow answer must not
			// lower the rate (its timeout bounds how many are in flight).
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				err := p.ask(ctx)
				if ctx.Err() != nil {
					return // cut short by Stop: not a failure of the service
				}
				p.mu.Lock()
				p.results = append(p.results, probeResult{at: now, err: err})
				p.mu.Unlock()
				if p.cfg.OnResult != nil {
					p.cfg.OnResult(err == "")
				}
			}()
		}
	}
}

// ask sends one request; "" means it passed.
func (p *Probe) ask(ctx context.Context) string { return askOnce(ctx, p.client, p.cfg) }

// askOnce sends cfg's request with client; "" means it passed, anything
// else says why not: for a request that failed, also the phase it was in
// (a timeout says only "awaiting headers", whether the DNS answer, the
// connection or the answer was late).
func askOnce(ctx context.Context, client *http.Client, cfg ProbeConfig) string {
	ph := &phase{start: time.Now(), name: "dial"}
	ctx = context.WithValue(ctx, phaseKey{}, ph)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { ph.set("writing the request") },
		WroteRequest: func(httptrace.WroteRequestInfo) { ph.set("awaiting the answer") },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.URL, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return err.Error() + " [" + ph.String() + "]"
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case err != nil:
		return "read: " + err.Error()
	case resp.StatusCode/100 != 2:
		return "status " + resp.Status
	case !strings.Contains(string(body), cfg.Expect):
		return fmt.Sprintf("answer %q lacks %q", body, cfg.Expect)
	}
	return ""
}

// phase is how far one request got: the transport's DialContext (a lab
// host's) and the client trace set it.
type phase struct {
	mu    sync.Mutex
	start time.Time
	name  string
	since time.Time
}

type phaseKey struct{}

func (p *phase) set(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.name, p.since = name, time.Now()
}

func (p *phase) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.since.IsZero() {
		return fmt.Sprintf("in %s after %s", p.name, time.Since(p.start).Round(time.Millisecond))
	}
	return fmt.Sprintf("in %s since +%s, after %s", p.name, p.since.Sub(p.start).Round(time.Millisecond), time.Since(p.start).Round(time.Millisecond))
}

// setPhase records a dial's progress on the request's phase, if it has one.
func setPhase(ctx context.Context, name string) {
	if p, ok := ctx.Value(phaseKey{}).(*phase); ok {
		p.set(name)
	}
}

// Stop ends the probe, waits for requests in flight and reports.
func (p *Probe) Stop() ProbeReport {
	p.cancel()
	<-p.done
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return summarize(p.cfg.Name, p.results)
}

// summarize counts results and finds the longest outage: from the first
// failure of a run of failures to the next pass (or, for a run that lasts
// to the end, to its last failure).
func summarize(name string, results []probeResult) ProbeReport {
	rs := append([]probeResult(nil), results...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].at.Before(rs[j].at) })
	r := ProbeReport{Name: name, Sent: len(rs)}
	var outageStart time.Time
	failedInRun := 0
	closeOutage := func(end time.Time) {
		if outageStart.IsZero() {
			return
		}
		if end.Sub(outageStart) > r.LongestOutage {
			r.LongestOutage = end.Sub(outageStart)
			r.LongestOutageFrom = outageStart
		}
		if len(r.Outages) < maxFailuresKept {
			r.Outages = append(r.Outages, ProbeOutage{From: outageStart, To: end, Failed: failedInRun})
		}
		outageStart, failedInRun = time.Time{}, 0
	}
	for _, x := range rs {
		if x.err == "" {
			closeOutage(x.at)
			continue
		}
		r.Failed++
		failedInRun++
		if len(r.Failures) < maxFailuresKept {
			r.Failures = append(r.Failures, ProbeFailure{At: x.at, Err: x.err})
		}
		if outageStart.IsZero() {
			outageStart = x.at
		}
	}
	if n := len(rs); n > 0 && !outageStart.IsZero() {
		closeOutage(rs[n-1].at)
	}
	return r
}

// HostTransport sends requests from inside host's network namespace, on a
// new connection each, resolving names with the DNS server at dnsServer
// ("10.96.0.10:53", the cluster's) asked from the same namespace — so a
// request takes the path a pod's would: cluster DNS, then the Service's
// ClusterIP through kube-proxy's rules on that node.
func (l *Lab) HostTransport(host, dnsServer string) http.RoundTripper {
	ns := nsPath(l.net.HostNS(host))
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return DialInNamespace(ctx, ns, network, dnsServer)
	}}
	return &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			h, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			setPhase(ctx, "the DNS lookup of "+h)
			ips, err := res.LookupHost(ctx, h)
			if err != nil {
				return nil, err
			}
			setPhase(ctx, "connecting to "+ips[0])
			return DialInNamespace(ctx, ns, network, net.JoinHostPort(ips[0], port))
		},
	}
}

// WorkloadProbes are the lab's two views of the sample Deployment: from
// inside the cluster by its Service name (cluster DNS, then kube-proxy on
// the first control-plane host), and from outside every host through the
// data-plane load balancer (lb-1's HAProxy) — the second only when the
// topology has a loadBalancer host.
func (l *Lab) WorkloadProbes() []ProbeConfig {
	expect := "pod=" + DemoDeploy + "-"
	var out []ProbeConfig
	if cps := l.cfg.Topology.WithRole(RoleControlPlane); len(cps) > 0 {
		out = append(out, ProbeConfig{
			Name:      "service " + DemoDeploy + "." + DemoNamespace + " from " + cps[0].Name,
			URL:       fmt.Sprintf("http://%s.%s.svc.cluster.local:%d/", DemoDeploy, DemoNamespace, LBPort),
			Expect:    expect,
			Transport: l.HostTransport(cps[0].Name, net.JoinHostPort(ClusterDNS, "53")),
		})
	}
	if lbs := l.cfg.Topology.WithRole(RoleLoadBalancer); len(lbs) > 0 {
		ns := nsPath(l.net.LabNS())
		out = append(out, ProbeConfig{
			Name:   "load balancer " + lbs[0].Name + " from outside the hosts",
			URL:    fmt.Sprintf("http://%s/", net.JoinHostPort(lbs[0].IP, fmt.Sprint(LBPort))),
			Expect: expect,
			Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				setPhase(ctx, "connecting to "+addr)
				return DialInNamespace(ctx, ns, network, addr)
			}},
		})
	}
	return out
}
