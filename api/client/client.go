package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moltproject/molt/api"
)

// Client is a typed client of the coordinator's /v1 API. It may know
// several endpoints, the members of one coordinator, and fails over from
// one to the next (see Do). It is safe for concurrent use.
type Client struct {
	// endpoints are base URLs without a trailing slash, in the order given.
	endpoints []string
	http      *http.Client
	// current is the index in endpoints of the member that answered last;
	// every request starts there.
	current atomic.Int32
	// seen is the highest Raft index an answer reflected (api.IndexHeader);
	// reads ask for at least this much (see api/consistency.go).
	seen atomic.Uint64
	// bearer is the operator's or enrolling agent's token, sent as
	// "Authorization: Bearer"; empty for callers that authenticate by
	// client certificate.
	bearer atomic.Pointer[string]
}

// SetBearerToken makes every later request carry token as its bearer
// credential ("" sends none).
func (c *Client) SetBearerToken(token string) { c.bearer.Store(&token) }

// Seen returns the highest coordinator state index the client has seen.
func (c *Client) Seen() uint64 { return c.seen.Load() }

// Observe raises the index the client has seen to index: a caller that
// learnt one through another client passes it on. An agent enrolls with a
// client of its own (it has no certificate yet); the certificate it gets
// is in the state from the enrollment's index on, and a member whose
// replica trails that index would refuse it as not current
// (certificate-revoked) — asked for the index, the member catches up
// before it judges the certificate.
func (c *Client) Observe(index uint64) {
	for {
		old := c.seen.Load()
		if index <= old || c.seen.CompareAndSwap(old, index) {
			return
		}
	}
}

// observe raises seen to the index an answer carries.
func (c *Client) observe(h http.Header) {
	v, err := strconv.ParseUint(h.Get(api.IndexHeader), 10, 64)
	if err != nil {
		return
	}
	c.Observe(v)
}

// New returns a client for the coordinator at base (e.g.
// "http://127.0.0.1:7080"). A nil httpClient means a default with no global
// timeout; long polls pass their own deadlines through the context.
func New(base string, httpClient *http.Client) *Client {
	return NewEndpoints([]string{base}, httpClient)
}

// NewEndpoints returns a client for a coordinator whose members
// answer at endpoints (base URLs; see ParseEndpoints). Any member serves
// any request: followers forward to the leader. httpClient is as for
// New.
func NewEndpoints(endpoints []string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	eps := make([]string, 0, len(endpoints))
	for _, e := range endpoints {
		if e = strings.TrimRight(strings.TrimSpace(e), "/"); e != "" {
			eps = append(eps, e)
		}
	}
	return &Client{endpoints: eps, http: httpClient}
}

// ParseEndpoints splits a comma-separated list of coordinator base URLs
// ("http://m1:7080,http://m2:7080") and checks that each is an http or
// https URL with a host. Spaces around entries and trailing slashes are
// dropped.
func ParseEndpoints(s string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimRight(strings.TrimSpace(e), "/")
		if e == "" {
			continue
		}
		u, err := url.Parse(e)
		if err != nil {
			return nil, fmt.Errorf("coordinator endpoint %q: %w", e, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("coordinator endpoint %q: want http(s)://host[:port]", e)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no coordinator endpoint in %q", s)
	}
	return out, nil
}

// Base returns the coordinator endpoint the client talks to now: the one
// that answered last, or the first before any request.
func (c *Client) Base() string {
	if len(c.endpoints) == 0 {
		return ""
	}
	return c.endpoints[c.current.Load()]
}

// SpreadBy makes the client start at an endpoint picked by a hash of
// key instead of the first one: agents configured with the same list of
// members, each spread by its node name, share their load among the
// members rather than all beating at the first one until it fails. It
// returns the index of that endpoint.
func (c *Client) SpreadBy(key string) int {
	if len(c.endpoints) == 0 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	i := int(h.Sum32() % uint32(len(c.endpoints)))
	c.current.Store(int32(i))
	return i
}

// Current is the index in Endpoints of the endpoint the next request
// starts at: the one that answered last.
func (c *Client) Current() int { return int(c.current.Load()) }

// Endpoints returns every endpoint the client knows, in the order given.
func (c *Client) Endpoints() []string { return append([]string(nil), c.endpoints...) }

// Do sends a JSON request and decodes a JSON answer into out (when non-nil).
// A non-2xx answer comes back as an *api.Problem error.
//
// With several endpoints, Do starts at the one that answered last and moves
// to the next, trying each once, when a member cannot be reached (connection
// refused or reset, timeout, a connection that stopped answering: see
// ConfigureTransport) or answers 502 or 503 (it has no leader, or could not
// forward to it). When none answered, the next request starts at the
// endpoint after the one this request started at. Requests that may have reached a member are
// repeated only when they are idempotent: every method but POST and PATCH.
// A POST is repeated only when it surely was not sent (the connection could
// not be opened); the agent's calls that must survive a member's loss use
// idempotentDo instead. When every endpoint failed, the error names them
// all and wraps each one's error. The caller's context ending stops the
// failover at once.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) (int, error) {
	return c.do(ctx, method != http.MethodPost && method != http.MethodPatch, method, path, in, out)
}

// idempotentDo is Do for a request the coordinator treats as idempotent
// whatever its method, so it may be repeated on another member even if
// the first one applied it.
func (c *Client) idempotentDo(ctx context.Context, method, path string, in, out any) (int, error) {
	return c.do(ctx, true, method, path, in, out)
}

func (c *Client) do(ctx context.Context, idempotent bool, method, path string, in, out any) (int, error) {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = b
	}
	n := len(c.endpoints)
	if n == 0 {
		return 0, fmt.Errorf("%s %s: no coordinator endpoint configured", method, path)
	}
	st, err := c.tryEndpoints(ctx, idempotent, method, path, body, in != nil, out)
	if err != nil && c.allLagging(err) {
		// Every member is behind what this client saw: the coordinator was
		// restored from an older backup, or rebuilt. Its state is the truth
		// now; forget the old index rather than refuse to read forever.
		c.seen.Store(0)
		return c.tryEndpoints(ctx, idempotent, method, path, body, in != nil, out)
	}
	return st, err
}

// allLagging reports whether err says that every endpoint was behind.
func (c *Client) allLagging(err error) bool {
	var failed *endpointsError
	if !errors.As(err, &failed) {
		return api.IsProblem(err, api.ProblemLagging)
	}
	for _, e := range failed.errs {
		if !api.IsProblem(e, api.ProblemLagging) {
			return false
		}
	}
	return len(failed.errs) > 0
}

// tryEndpoints sends the request to each endpoint in turn, from the one
// that answered last, until one answers in a way that ends the failover.
func (c *Client) tryEndpoints(ctx context.Context, idempotent bool, method, path string, body []byte, hasBody bool, out any) (int, error) {
	n := len(c.endpoints)
	start := int(c.current.Load())
	failed := &endpointsError{method: method, path: path}
	status := 0
	for i := range n {
		idx := (start + i) % n
		st, next, err := c.attempt(ctx, idempotent, c.endpoints[idx], method, path, body, hasBody, out)
		if !next || ctx.Err() != nil {
			if !next {
				c.current.Store(int32(idx))
			}
			return st, err
		}
		status = st
		failed.endpoints = append(failed.endpoints, c.endpoints[idx])
		failed.errs = append(failed.errs, err)
	}
	if n == 1 {
		return status, failed.errs[0] // the error names its one URL already
	}
	// The next request starts one further on: the member that answered
	// last may be the one that stopped answering (frozen, cut off), and
	// trying it first again would cost its timeout every time.
	c.current.CompareAndSwap(int32(start), int32((start+1)%n))
	return status, failed
}

// attempt sends the request to one endpoint. next reports that the
// endpoint failed in a way another member may not (see Do).
func (c *Client) attempt(ctx context.Context, idempotent bool, base, method, path string, body []byte, hasBody bool, out any) (status int, next bool, err error) {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return 0, false, err
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if tok := c.bearer.Load(); tok != nil && *tok != "" {
		req.Header.Set("Authorization", "Bearer "+*tok)
	}
	if seen := c.seen.Load(); seen > 0 {
		req.Header.Set(api.MinIndexHeader, strconv.FormatUint(seen, 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, idempotent || notSent(err), err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 300 {
		c.observe(resp.Header)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, idempotent, err
	}
	if resp.StatusCode >= 300 {
		p := &api.Problem{Status: resp.StatusCode}
		if json.Unmarshal(data, p) != nil || p.Type == "" {
			p.Type = api.ProblemTypeBase + api.ProblemInternal
			p.Detail = strings.TrimSpace(string(data))
		}
		unavailable := resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable
		return resp.StatusCode, unavailable && idempotent, p
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, false, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, false, nil
}

// notSent reports whether a transport error shows that the request never
// left: no connection could be opened (refused, unreachable, name not
// found, dial timeout).
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// endpointsError is Do's error when no endpoint answered usefully.
type endpointsError struct {
	method, path string
	// endpoints and errs are parallel: what each endpoint tried failed with.
	endpoints []string
	errs      []error
}

func (e *endpointsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: no coordinator endpoint answered (tried %s)", e.method, e.path, strings.Join(e.endpoints, ", "))
	for i, err := range e.errs {
		fmt.Fprintf(&b, "; %s: %v", e.endpoints[i], err)
	}
	return b.String()
}

// Unwrap lets errors.Is and errors.As see every endpoint's error.
func (e *endpointsError) Unwrap() []error { return e.errs }

func agentPath(cluster, node string, rest string) string {
	return "/v1/agents/" + url.PathEscape(cluster) + "/" + url.PathEscape(node) + rest
}

// Register, Heartbeat and ReportResult are POSTs, yet they may be repeated
// on another coordinator member after a reset or a 503 even if the first
// member applied them: the coordinator treats repeats idempotently.
// Registering again only re-marks the agent registered at the same address
// (agents re-register on every start anyway); a heartbeat is a state, not
// an event; and a result is keyed by its operation ID (an upgrade step's
// ID names upgrade, node, step and attempt; a preflight check's names run
// and node), so a repeat of a result already applied is recognised as
// stale and answered 200 without changing anything.

// Register announces an agent to the coordinator.
func (c *Client) Register(ctx context.Context, r api.RegisterRequest) (api.RegisterResponse, error) {
	var out api.RegisterResponse
	_, err := c.idempotentDo(ctx, http.MethodPost, "/v1/agents/register", r, &out)
	return out, err
}

// Heartbeat sends the agent's health.
func (c *Client) Heartbeat(ctx context.Context, h api.AgentHealth) error {
	_, err := c.idempotentDo(ctx, http.MethodPost, agentPath(h.Cluster, h.Node, "/heartbeat"), h, nil)
	return err
}

// PollOperations long-polls for the node's pending operations; the
// coordinator answers at once when some are pending, otherwise after up to
// wait with an empty list.
func (c *Client) PollOperations(ctx context.Context, cluster, node string, wait time.Duration) ([]api.Operation, error) {
	out, err := c.Poll(ctx, cluster, node, wait)
	return out.Operations, err
}

// Poll is PollOperations returning the whole answer: the operations and
// what the coordinator says besides (api.OperationsResponse.Upgrade).
func (c *Client) Poll(ctx context.Context, cluster, node string, wait time.Duration) (api.OperationsResponse, error) {
	var out api.OperationsResponse
	p := agentPath(cluster, node, "/operations") + "?wait=" + url.QueryEscape(wait.String())
	_, err := c.Do(ctx, http.MethodGet, p, nil, &out)
	return out, err
}

// ReportResult reports an operation's progress or outcome.
func (c *Client) ReportResult(ctx context.Context, cluster, node string, r api.OperationResult) error {
	_, err := c.idempotentDo(ctx, http.MethodPost, agentPath(cluster, node, "/results"), r, nil)
	return err
}

// StartPreflight starts a preflight run of cluster for an upgrade to
// version and returns it, still running. It is not repeated on another
// member after the request may have been sent: each call starts a new run.
func (c *Client) StartPreflight(ctx context.Context, cluster, version string) (api.PreflightRun, error) {
	var out api.PreflightRun
	_, err := c.Do(ctx, http.MethodPost, "/v1/clusters/"+url.PathEscape(cluster)+"/preflight", api.PreflightRequest{Version: version}, &out)
	return out, err
}

// Preflight returns a stored preflight run of cluster.
func (c *Client) Preflight(ctx context.Context, cluster, id string) (api.PreflightRun, error) {
	var out api.PreflightRun
	_, err := c.Do(ctx, http.MethodGet, "/v1/clusters/"+url.PathEscape(cluster)+"/preflight/"+url.PathEscape(id), nil, &out)
	return out, err
}
