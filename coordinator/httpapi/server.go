package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/convert"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/maintenance"
	"github.com/moltproject/molt/phases"
)

// Service is what the API needs of a coordinator member. Where the
// coordinator works with engine values (phases' cluster specs, upgrades
// and plans) or records of its own (stored preflight runs), the Service
// speaks those, and the handlers convert at the edge: answers through
// api/convert or wire.go, the cluster spec of a PUT through api/convert.
type Service interface {
	IsLeader() bool
	// LeaderHTTPAddr is the leader's REST address ("" when unknown).
	LeaderHTTPAddr() string
	// AppliedIndex and WaitApplied serve api.IndexHeader and
	// api.MinIndexHeader (consistency.go).
	AppliedIndex() uint64
	WaitApplied(ctx context.Context, index uint64) error
	// ReadIndex, on the leader, is an index that covers every write
	// acknowledged before the call (fresh.go).
	ReadIndex(ctx context.Context) (uint64, error)

	PutRelease(ctx context.Context, r api.Release) error
	Release(version string) (api.Release, error)
	Releases() []api.Release
	PutCluster(ctx context.Context, spec phases.ClusterSpec, kubeconfig string, policy *maintenance.Policy) error
	DeleteCluster(ctx context.Context, name string) error
	Cluster(name string) (api.Cluster, error)
	Clusters() []api.Cluster
	Upgrade(cluster string) (*phases.Upgrade, error)
	Plan(cluster string, req api.UpgradeRequest) (phases.Plan, error)
	StartUpgrade(ctx context.Context, cluster string, req api.UpgradeRequest) (*phases.Upgrade, error)
	PoolCommand(ctx context.Context, cluster, pool, command string) error
	RetryNode(ctx context.Context, cluster, node string) error
	Members() ([]api.Member, error)
	Join(ctx context.Context, r api.JoinRequest) error
	// MemberCertificate signs a member's certificate before it joins.
	MemberCertificate(ctx context.Context, r api.JoinRequest) (api.JoinResponse, error)
	RemoveMember(ctx context.Context, id string) error

	StartPreflight(ctx context.Context, cluster, version string) (string, error)
	Preflight(cluster, id string) (coordinator.PreflightRun, error)
	// Preflights lists a cluster's stored runs, newest first, without
	// their operations and results.
	Preflights(cluster string) ([]coordinator.PreflightSummary, error)

	// Automatic upgrades (scheduler.go in package coordinator).
	Channels() []api.Channel
	Channel(name string) (api.Channel, error)
	PutChannel(ctx context.Context, name string, u api.ChannelUpdate) error
	UpgradeStatus(cluster string) (api.UpgradeStatus, error)

	SetPolicy(ctx context.Context, cluster string, p maintenance.Policy) error
	Policy(cluster string) (maintenance.Policy, error)
	// CheckMaintenance judges at the member's own clock when at is zero.
	CheckMaintenance(cluster string, ch maintenance.Change, at time.Time) (api.MaintenanceCheck, error)

	// Credentials (trust.go in package coordinator).
	AuthenticateToken(token string) (api.Token, error)
	// AuthenticateBootstrapToken checks an enrollment's bootstrap token
	// (uses left included).
	AuthenticateBootstrapToken(token string) (api.Token, error)
	AgentCertValid(cluster, node, serial string) bool
	CreateToken(ctx context.Context, req api.TokenRequest, by string) (api.Token, error)
	Tokens() []api.Token
	DeleteToken(ctx context.Context, id string) error
	Enroll(ctx context.Context, bearer string, req api.EnrollRequest) (api.EnrollResponse, error)
	RenewAgentCert(ctx context.Context, cluster, node, oldSerial string, req api.RenewRequest) (api.EnrollResponse, error)

	// RewrapSecrets seals every stored secret again with the primary
	// encryption key (secrets.go in package coordinator).
	RewrapSecrets(ctx context.Context) (api.RewrapResult, error)

	// The audit log (audit.go in package coordinator): writes proposed
	// under a context that carries a coordinator.AuditIntent carry its
	// record; RecordAudit appends one on its own; AuditLog reads this
	// member's replica.
	RecordAudit(ctx context.Context, r coordinator.AuditRecord) error
	AuditLog(q api.AuditQuery) api.AuditPage

	Register(ctx context.Context, r api.RegisterRequest) (api.RegisterResponse, error)
	Heartbeat(ctx context.Context, h api.AgentHealth) error
	// BeatRelayable and RelayedHeartbeats serve the beats a follower
	// relays to the leader in batches (relay.go).
	BeatRelayable(h api.AgentHealth) (bool, error)
	RelayedHeartbeats(ctx context.Context, beats []coordinator.RelayedBeat) ([]error, error)
	// PollAgent is an agent's long poll: its operations and the
	// cluster's upgrade in progress.
	PollAgent(ctx context.Context, cluster, node string, wait time.Duration) (api.OperationsResponse, error)
	ReportResult(ctx context.Context, cluster, node string, r api.OperationResult) error
}

// Config configures the API server.
type Config struct {
	Logger   *slog.Logger
	Gatherer prometheus.Gatherer
	// MaxPoll caps an agent's long poll.
	MaxPoll time.Duration
	// ArtifactDir, when set, is served read-only at /artifacts/.
	ArtifactDir string
	// ForwardTransport carries requests a follower forwards to the leader:
	// TLS with this member's certificate, which is what lets the leader
	// believe the principal the follower forwards (auth.go). nil forwards
	// over plain HTTP (handler tests without TLS).
	ForwardTransport http.RoundTripper
	// CatchUp bounds how long a read waits for this member to reach the
	// client's last-seen index (consistency.go); default 2 s.
	CatchUp time.Duration
	// MaxPollsPerNode caps the long polls one node's agent has open at
	// once on this member; one more answers 429 too-many-requests.
	// Default DefaultMaxPollsPerNode.
	MaxPollsPerNode int
	// AuditRefusalEvery and AuditRefusalBurst bound how many refused
	// writes of one principal the audit log records: a burst of
	// AuditRefusalBurst, then one per AuditRefusalEvery (audit.go).
	// Defaults DefaultAuditRefusalEvery and DefaultAuditRefusalBurst.
	AuditRefusalEvery time.Duration
	AuditRefusalBurst int
	// Clock measures that rate; nil is the wall clock.
	Clock coordinator.Clock
	// DisableWeb turns the web view off: no /ui/, no /v1/session, and
	// session cookies are not looked at.
	DisableWeb bool
	// SessionTTL bounds a web session's life (default DefaultSessionTTL;
	// never past its token's expiry); MaxSessions how many this member
	// holds at once (default DefaultMaxSessions; one more is refused with
	// 429 too-many-requests, rule session-limit).
	SessionTTL  time.Duration
	MaxSessions int
	// BeatRelayWindow is how long a follower gathers agents' heartbeats
	// before relaying them to the leader in one request (relay.go):
	// default DefaultBeatRelayWindow; negative forwards every beat as a
	// request of its own.
	BeatRelayWindow time.Duration
}

// DefaultMaxPollsPerNode is the default of Config.MaxPollsPerNode: an
// agent polls once at a time.
const DefaultMaxPollsPerNode = 1

// forwardedHeader marks a request a follower forwarded, so that two members
// that each think the other leads cannot bounce a request forever.
const forwardedHeader = "X-Molt-Forwarded-By"

// New returns the HTTP handler of the API.
func New(svc Service, cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxPoll <= 0 {
		cfg.MaxPoll = 60 * time.Second
	}
	if cfg.CatchUp <= 0 {
		cfg.CatchUp = defaultCatchUp
	}
	if cfg.MaxPollsPerNode <= 0 {
		cfg.MaxPollsPerNode = DefaultMaxPollsPerNode
	}
	if cfg.AuditRefusalEvery <= 0 {
		cfg.AuditRefusalEvery = DefaultAuditRefusalEvery
	}
	if cfg.AuditRefusalBurst <= 0 {
		cfg.AuditRefusalBurst = DefaultAuditRefusalBurst
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.BeatRelayWindow == 0 {
		cfg.BeatRelayWindow = DefaultBeatRelayWindow
	}
	h := &handlers{svc: svc, cfg: cfg, polls: map[string]int{}, refusals: newRefusalLimiter(cfg.AuditRefusalEvery, cfg.AuditRefusalBurst)}
	if cfg.BeatRelayWindow > 0 {
		h.beats = newBeatRelay(h)
	}
	if !cfg.DisableWeb {
		h.sessions = newSessionStore(cfg.Clock.Now, cfg.SessionTTL, cfg.MaxSessions)
	}
	r := chi.NewRouter()
	r.Use(recoverer(cfg.Logger))
	r.NotFound(notFound)
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeJSONProblem(w, r, http.StatusMethodNotAllowed, api.ProblemMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path))
	})
	v1 := r.With(h.consistentIndex)
	// Operators' reads answer gzip-compressed JSON to clients that accept
	// it (browsers, and Go's HTTP client, which asks and decompresses on
	// its own): a 15,000-node cluster is 4 MB of JSON, 12 times less
	// compressed (docs/web.md). Agents' routes, whose long polls answer
	// small bodies, and /metrics (compressed by promhttp) are left alone.
	compress := middleware.Compress(5, "application/json", "application/problem+json")
	for _, rt := range h.routes() {
		// Who the caller is; the leader for what it serves; who an
		// enrollment's token is; the audit record of a write (which sees
		// the authorization's refusal); whether the caller may.
		mw := chi.Middlewares{h.authenticate(rt)}
		switch {
		case rt.serve.relay:
			mw = append(mw, h.relayBeats)
		case rt.serve.leader && rt.need != NeedAgent:
			mw = append(mw, h.holdForLeader, h.leaderOnly)
		case rt.serve.leader:
			mw = append(mw, h.leaderOnly)
		}
		if rt.method == http.MethodGet && strings.HasPrefix(rt.pattern, "/v1/") && (rt.need == NeedViewer || rt.need == NeedAdmin) {
			mw = append(mw, compress)
		}
		if rt.need == NeedBootstrapToken {
			mw = append(mw, h.checkBootstrap)
		}
		if rt.serve.audit != 0 {
			mw = append(mw, h.recordWrite(rt))
		}
		mw = append(mw, h.authorizeRoute(rt.need))
		base := chi.Router(r)
		if strings.HasPrefix(rt.pattern, "/v1/") {
			base = v1
		}
		base.With(mw...).Method(rt.method, rt.pattern, rt.handler)
	}
	return r
}

// notFound answers a path no route serves.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, r, fmt.Errorf("no route %s %s: %w", r.Method, r.URL.Path, coordinator.ErrNotFound))
}

func writeJSONProblem(w http.ResponseWriter, r *http.Request, status int, suffix, detail string) {
	p := &api.Problem{Type: api.ProblemTypeBase + suffix, Title: http.StatusText(status), Status: status, Detail: detail, Instance: r.URL.Path}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = jsonEncode(w, p)
}

type handlers struct {
	svc Service
	cfg Config
	// sessions are the web view's sessions on this member (session.go);
	// nil with Config.DisableWeb.
	sessions *sessionStore

	pollMu sync.Mutex
	polls  map[string]int // open long polls by "cluster/node"

	// refusals rates the refused writes the audit log records.
	refusals *refusalLimiter

	// beats relays agents' heartbeats from a follower to the leader
	// (relay.go); nil forwards each beat.
	beats *beatRelay
}

// enterPoll counts a long poll of node in, or refuses it beyond
// Config.MaxPollsPerNode; the caller calls the returned function when the
// poll ends.
func (h *handlers) enterPoll(cluster, node string) (func(), error) {
	key := cluster + "/" + node
	h.pollMu.Lock()
	defer h.pollMu.Unlock()
	if h.polls[key] >= h.cfg.MaxPollsPerNode {
		return nil, &coordinator.RuleError{Rule: "poll-concurrency",
			Detail: fmt.Sprintf("%s already has %d long poll(s) open; at most %d", key, h.polls[key], h.cfg.MaxPollsPerNode), Err: errTooManyPolls}
	}
	h.polls[key]++
	return func() {
		h.pollMu.Lock()
		defer h.pollMu.Unlock()
		if h.polls[key]--; h.polls[key] <= 0 {
			delete(h.polls, key)
		}
	}, nil
}

// leaderOnly forwards requests that change state (and agents' calls, whose
// liveness and work queues live on the leader) to the leader.
func (h *handlers) leaderOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded := r.Header.Get(forwardedHeader) != ""
		for attempt := 0; ; attempt++ {
			if h.svc.IsLeader() {
				next.ServeHTTP(w, r)
				return
			}
			changed := h.leaderChanges()
			leader := h.svc.LeaderHTTPAddr()
			if leader == "" && attempt > 0 && changed != nil {
				// The leader this request was forwarded to was lost: wait
				// a little for the election rather than send the client
				// round the members.
				h.awaitLeader(r.Context())
				if h.svc.IsLeader() {
					next.ServeHTTP(w, r)
					return
				}
				changed = h.leaderChanges()
				leader = h.svc.LeaderHTTPAddr()
			}
			if leader == "" || forwarded {
				writeProblem(w, r, errNoLeader)
				return
			}
			if !h.forward(w, r, leader, changed) || attempt >= maxReforwards {
				return
			}
		}
	})
}

// maxReforwards bounds how often one request follows a leader change.
const maxReforwards = 2

// errLeaderChanged ends a forwarded request whose leader was replaced
// while it waited for the answer.
var errLeaderChanged = errors.New("the leader changed while the request was forwarded")

// leaderChanges returns the Service's leader-change channel, or nil when
// it cannot tell (test doubles).
func (h *handlers) leaderChanges() <-chan struct{} {
	if lc, ok := h.svc.(interface{ LeaderChanged() <-chan struct{} }); ok {
		return lc.LeaderChanged()
	}
	return nil
}

// awaitLeader waits up to CatchUp, or until ctx ends, for some leader to
// be known (this member, or another whose address it knows).
func (h *handlers) awaitLeader(ctx context.Context) {
	deadline := time.NewTimer(h.cfg.CatchUp)
	defer deadline.Stop()
	// A leader's address can arrive without a leader observation: Raft
	// names the leader first, and its address comes with its member
	// metadata, applied here later (a member that just joined, a leader
	// that just recorded a new address). Nothing signals that apply.
	tick := time.NewTicker(leaderAddrPoll)
	defer tick.Stop()
	for {
		changed := h.leaderChanges()
		if h.svc.IsLeader() || h.svc.LeaderHTTPAddr() != "" {
			return
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// leaderAddrPoll is how often awaitLeader looks for a leader's address
// that no leader observation announced.
const leaderAddrPoll = 20 * time.Millisecond

// holdForLeader holds an operator's request (and an enrollment) at a
// member that knows no leader, or not yet the leader's address, for up
// to CatchUp until it does, rather than answer 503 no-leader at once:
// an election lasts about a second, and an operator's client often knows
// one member, which would refuse every request of that second. Agents'
// calls are not held: an agent lists every member and moves to the next
// at once, and a member cut off from its peers knows no leader for as
// long as it is cut off. A request another member forwarded is not held
// either: it was sent to the leader this member no longer is, and the
// forwarding member follows the change itself (leaderOnly).
func (h *handlers) holdForLeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(forwardedHeader) == "" && !h.svc.IsLeader() && h.svc.LeaderHTTPAddr() == "" {
			h.awaitLeader(r.Context())
		}
		next.ServeHTTP(w, r)
	})
}

// forward proxies r to the leader at leader. A leader that stops
// answering (frozen, cut off) is noticed by the forwarding transport's
// pings (api/client.ConfigureTransport), or sooner when Raft elects another:
// changed closes, the forward is abandoned, and forward reports that a
// GET (an agent's long poll) may be sent again, to the new leader;
// anything else answers 503 no-leader, as any failed forward does.
func (h *handlers) forward(w http.ResponseWriter, r *http.Request, leader string, changed <-chan struct{}) (again bool) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if changed != nil {
		go h.cancelOnLeaderChange(ctx, cancel, errLeaderChanged, leader, changed)
	}
	scheme := "http"
	if h.cfg.ForwardTransport != nil {
		scheme = "https"
	}
	target := &url.URL{Scheme: scheme, Host: leader}
	proxy := httputil.NewSingleHostReverseProxy(target)
	if h.cfg.ForwardTransport != nil {
		proxy.Transport = h.cfg.ForwardTransport
	}
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if errors.Is(context.Cause(ctx), errLeaderChanged) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			again = true
			return
		}
		writeProblem(w, r, fmt.Errorf("forward to leader %s: %v: %w", leader, err, errNoLeader))
	}
	r.Header.Set(forwardedHeader, "1")
	forwardPrincipal(r)
	proxy.ServeHTTP(w, r.WithContext(ctx))
	return again
}

// cancelOnLeaderChange cancels a forward to leader, with cause, when this
// member comes to lead or to know another leader, or none. A signal alone
// is not enough: Raft's leader observations reach LeaderChanged after Raft
// already answers with the leader they name, so a signal can arrive for
// the very leader the request was sent to (seen right after a leadership
// transfer); that one is let pass and the next awaited.
func (h *handlers) cancelOnLeaderChange(ctx context.Context, cancel context.CancelCauseFunc, cause error, leader string, changed <-chan struct{}) {
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
		changed = h.leaderChanges()
		if h.svc.IsLeader() || h.svc.LeaderHTTPAddr() != leader {
			cancel(cause)
			return
		}
	}
}

func (h *handlers) readyz(w http.ResponseWriter, r *http.Request) {
	if h.svc.IsLeader() || h.svc.LeaderHTTPAddr() != "" {
		writeJSON(w, 200, map[string]string{"status": "ready"})
		return
	}
	writeProblem(w, r, errNoLeader)
}

func (h *handlers) members(w http.ResponseWriter, r *http.Request) {
	ms, err := h.svc.Members()
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, ms)
}

func (h *handlers) join(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.Join(r.Context(), req); err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, req)
}

func (h *handlers) removeMember(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.RemoveMember(r.Context(), chi.URLParam(r, "id")); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handlers) releases(w http.ResponseWriter, _ *http.Request) {
	rs := h.svc.Releases()
	if rs == nil {
		rs = []api.Release{}
	}
	writeJSON(w, 200, rs)
}

func (h *handlers) release(w http.ResponseWriter, r *http.Request) {
	rel, err := h.svc.Release(chi.URLParam(r, "version"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, rel)
}

func (h *handlers) putRelease(w http.ResponseWriter, r *http.Request) {
	var rel api.Release
	if err := decode(w, r, &rel); err != nil {
		writeProblem(w, r, err)
		return
	}
	v := chi.URLParam(r, "version")
	if rel.Version == "" {
		rel.Version = v
	}
	a, errA := phases.ParseVersion(v)
	b, errB := phases.ParseVersion(rel.Version)
	if err := errors.Join(errA, errB); err != nil {
		writeProblem(w, r, &coordinator.RuleError{Rule: phases.RuleInvalid, Detail: err.Error(), Err: coordinator.ErrInvalid})
		return
	}
	if a != b {
		writeProblem(w, r, &coordinator.RuleError{Rule: "release-version", Detail: fmt.Sprintf("body version %q does not match the path's %q", rel.Version, v), Err: coordinator.ErrInvalid})
		return
	}
	if err := h.svc.PutRelease(r.Context(), rel); err != nil {
		writeProblem(w, r, err)
		return
	}
	out, _ := h.svc.Release(v)
	writeJSON(w, 200, out)
}

func (h *handlers) clusters(w http.ResponseWriter, _ *http.Request) {
	cs := h.svc.Clusters()
	if cs == nil {
		cs = []api.Cluster{}
	}
	writeJSON(w, 200, cs)
}

func (h *handlers) cluster(w http.ResponseWriter, r *http.Request) {
	c, err := h.svc.Cluster(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, c)
}

func (h *handlers) putCluster(w http.ResponseWriter, r *http.Request) {
	var body api.ClusterSpec
	if err := decode(w, r, &body); err != nil {
		writeProblem(w, r, err)
		return
	}
	spec, err := convert.ClusterSpecFromAPI(body)
	if err != nil {
		// A version that is not 1.N.X is refused as version-invalid
		// (problemFor); anything else the conversion refuses makes the
		// body malformed.
		if !errors.Is(err, phases.ErrInvalidVersion) {
			err = fmt.Errorf("%w: %v", errBadRequest, err)
		}
		writeProblem(w, r, err)
		return
	}
	name := chi.URLParam(r, "name")
	if spec.Name == "" {
		spec.Name = name
	}
	if spec.Name != name {
		writeProblem(w, r, &coordinator.RuleError{Rule: "cluster-name", Detail: fmt.Sprintf("body name %q does not match the path's %q", spec.Name, name), Err: coordinator.ErrInvalid})
		return
	}
	if err := h.svc.PutCluster(r.Context(), spec, body.Kubeconfig, convert.MaintenancePolicyFromAPI(body.MaintenancePolicy)); err != nil {
		writeProblem(w, r, err)
		return
	}
	c, err := h.svc.Cluster(name)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, c)
}

func (h *handlers) deleteCluster(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.DeleteCluster(r.Context(), chi.URLParam(r, "name")); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handlers) upgrade(w http.ResponseWriter, r *http.Request) {
	u, err := h.svc.Upgrade(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	out := convert.UpgradeToAPI(u)
	// The forecast is made here, so that clients show the coordinator's
	// estimate rather than each running the planner on its own copy.
	out.Forecast = convert.UpgradeForecastToAPI(u, h.cfg.Clock.Now())
	writeJSON(w, 200, out)
}

func (h *handlers) startUpgrade(w http.ResponseWriter, r *http.Request) {
	var req api.UpgradeRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	name := chi.URLParam(r, "name")
	if req.DryRun {
		// A dry run changes nothing: not a write the audit log records.
		if in := coordinator.AuditIntentFrom(r.Context()); in != nil {
			in.Skip()
		}
		plan, err := h.svc.Plan(name, req)
		if err != nil {
			writeProblem(w, r, err)
			return
		}
		writeJSON(w, 200, convert.PlanToAPI(plan))
		return
	}
	u, err := h.svc.StartUpgrade(r.Context(), name, req)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, convert.UpgradeToAPI(u))
}

func (h *handlers) poolCommand(w http.ResponseWriter, r *http.Request) {
	h.runPoolCommand(w, r, chi.URLParam(r, "cmd"))
}

// poolVerb accepts the SPEC's "upgrade:cancel" form as well.
func (h *handlers) poolVerb(w http.ResponseWriter, r *http.Request) {
	verb := chi.URLParam(r, "verb")
	const prefix = "upgrade:"
	if len(verb) <= len(prefix) || verb[:len(prefix)] != prefix {
		writeProblem(w, r, fmt.Errorf("no route %s %s: %w", r.Method, r.URL.Path, coordinator.ErrNotFound))
		return
	}
	h.runPoolCommand(w, r, verb[len(prefix):])
}

func (h *handlers) runPoolCommand(w http.ResponseWriter, r *http.Request, cmd string) {
	if err := decodeNone(w, r); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.PoolCommand(r.Context(), chi.URLParam(r, "name"), chi.URLParam(r, "pool"), cmd); err != nil {
		writeProblem(w, r, err)
		return
	}
	u, err := h.svc.Upgrade(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, convert.UpgradeToAPI(u))
}

func (h *handlers) retryNode(w http.ResponseWriter, r *http.Request) {
	if err := decodeNone(w, r); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.RetryNode(r.Context(), chi.URLParam(r, "name"), chi.URLParam(r, "node")); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handlers) register(w http.ResponseWriter, r *http.Request) {
	var req api.RegisterRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := checkAgentBody(r, req.Cluster, req.Node); err != nil {
		writeProblem(w, r, err)
		return
	}
	resp, err := h.svc.Register(r.Context(), req)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, resp)
}

func (h *handlers) heartbeat(w http.ResponseWriter, r *http.Request) {
	hb, err := beatOf(w, r)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.Heartbeat(r.Context(), hb); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// beatOf reads an agent's heartbeat: its body must name the caller's own
// node, the one the path names.
func beatOf(w http.ResponseWriter, r *http.Request) (api.AgentHealth, error) {
	var hb api.AgentHealth
	if err := decode(w, r, &hb); err != nil {
		return hb, err
	}
	if err := checkAgentBody(r, hb.Cluster, hb.Node); err != nil {
		return hb, err
	}
	if hb.Cluster != chi.URLParam(r, "cluster") || hb.Node != chi.URLParam(r, "node") {
		return hb, &coordinator.RuleError{Rule: "agent-identity", Detail: "heartbeat body names another node than the path", Err: coordinator.ErrInvalid}
	}
	return hb, nil
}

func (h *handlers) poll(w http.ResponseWriter, r *http.Request) {
	wait := time.Duration(0)
	if s := r.URL.Query().Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			writeProblem(w, r, &coordinator.RuleError{Rule: "wait", Detail: fmt.Sprintf("wait=%q is not a duration", s), Err: coordinator.ErrInvalid})
			return
		}
		wait = min(d, h.cfg.MaxPoll)
	}
	cluster, node := chi.URLParam(r, "cluster"), chi.URLParam(r, "node")
	leave, err := h.enterPoll(cluster, node)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	defer leave()
	resp, err := h.svc.PollAgent(r.Context(), cluster, node, wait)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	if resp.Operations == nil {
		resp.Operations = []api.Operation{}
	}
	writeJSON(w, 200, resp)
}

func (h *handlers) result(w http.ResponseWriter, r *http.Request) {
	var res api.OperationResult
	if err := decode(w, r, &res); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.ReportResult(r.Context(), chi.URLParam(r, "cluster"), chi.URLParam(r, "node"), res); err != nil {
		writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handlers) channels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, 200, h.svc.Channels())
}

func (h *handlers) channel(w http.ResponseWriter, r *http.Request) {
	ch, err := h.svc.Channel(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, ch)
}

// channelBody is api.ChannelUpdate as it arrives: each field must be
// there, so unsetting a version is always said ("") and never follows
// from a field left out.
type channelBody struct {
	DefaultVersion    *string `json:"defaultVersion"`
	AutoUpgradeTarget *string `json:"autoUpgradeTarget"`
}

func (h *handlers) putChannel(w http.ResponseWriter, r *http.Request) {
	var b channelBody
	if err := decode(w, r, &b); err != nil {
		writeProblem(w, r, err)
		return
	}
	if b.DefaultVersion == nil || b.AutoUpgradeTarget == nil {
		writeProblem(w, r, &coordinator.RuleError{Rule: "channel-update", Detail: `a channel update sets both defaultVersion and autoUpgradeTarget (a version, or "" to unset it)`, Err: coordinator.ErrInvalid})
		return
	}
	u := api.ChannelUpdate{DefaultVersion: *b.DefaultVersion, AutoUpgradeTarget: *b.AutoUpgradeTarget}
	if err := h.svc.PutChannel(r.Context(), chi.URLParam(r, "name"), u); err != nil {
		writeProblem(w, r, err)
		return
	}
	h.channel(w, r)
}

func (h *handlers) upgradeStatus(w http.ResponseWriter, r *http.Request) {
	st, err := h.svc.UpgradeStatus(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, st)
}

func (h *handlers) policy(w http.ResponseWriter, r *http.Request) {
	p, err := h.svc.Policy(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, convert.MaintenancePolicyToAPI(p))
}

func (h *handlers) putPolicy(w http.ResponseWriter, r *http.Request) {
	var p api.MaintenancePolicy
	if err := decode(w, r, &p); err != nil {
		writeProblem(w, r, err)
		return
	}
	if err := h.svc.SetPolicy(r.Context(), chi.URLParam(r, "name"), *convert.MaintenancePolicyFromAPI(&p)); err != nil {
		writeProblem(w, r, err)
		return
	}
	h.policy(w, r)
}

func (h *handlers) checkPolicy(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bad := func(rule, detail string) {
		writeProblem(w, r, &coordinator.RuleError{Rule: rule, Detail: detail, Err: coordinator.ErrInvalid})
	}
	ch := maintenance.Change{Target: maintenance.Target(q.Get("target")), Kind: maintenance.ChangeKind(q.Get("change"))}
	if ch.Target != maintenance.TargetControlPlane && ch.Target != maintenance.TargetNodes {
		bad("target", fmt.Sprintf("target=%q: want controlPlane or nodes", ch.Target))
		return
	}
	if ch.Kind != maintenance.KindMinor && ch.Kind != maintenance.KindPatch && ch.Kind != maintenance.KindDisruption {
		bad("change", fmt.Sprintf("change=%q: want minor, patch or disruption", ch.Kind))
		return
	}
	var at time.Time // zero: the member's clock (Service.CheckMaintenance)
	if s := q.Get("at"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			bad("at", fmt.Sprintf("at=%q is not RFC 3339", s))
			return
		}
		at = t.UTC()
	}
	res, err := h.svc.CheckMaintenance(chi.URLParam(r, "name"), ch, at)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, res)
}

func (h *handlers) startPreflight(w http.ResponseWriter, r *http.Request) {
	var req api.PreflightRequest
	if err := decode(w, r, &req); err != nil {
		writeProblem(w, r, err)
		return
	}
	name := chi.URLParam(r, "name")
	id, err := h.svc.StartPreflight(r.Context(), name, req.Version)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	run, err := h.svc.Preflight(name, id)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, preflightRunToAPI(run))
}

func (h *handlers) preflights(w http.ResponseWriter, r *http.Request) {
	runs, err := h.svc.Preflights(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	out := make([]api.PreflightRunSummary, len(runs))
	for i, run := range runs {
		out[i] = preflightSummaryToAPI(run)
	}
	writeJSON(w, 200, out)
}

// calendar lays the cluster's maintenance policy out over days (default
// 60, at most maintenance.MaxCalendarSpan) from from (default: today,
// 00:00 UTC, on the API's clock): the window's open stretches and the
// exclusions in that range.
func (h *handlers) calendar(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bad := func(rule, detail string) {
		writeProblem(w, r, &coordinator.RuleError{Rule: rule, Detail: detail, Err: coordinator.ErrInvalid})
	}
	const day = 24 * time.Hour
	from := h.cfg.Clock.Now().UTC().Truncate(day)
	if s := q.Get("from"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			bad("from", fmt.Sprintf("from=%q is not RFC 3339", s))
			return
		}
		from = t.UTC()
	}
	days, maxDays := 60, int(maintenance.MaxCalendarSpan/day)
	if s := q.Get("days"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxDays {
			bad("days", fmt.Sprintf("days=%q: want a whole number from 1 to %d", s, maxDays))
			return
		}
		days = n
	}
	to := from.Add(time.Duration(days) * day)
	p, err := h.svc.Policy(chi.URLParam(r, "name"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	c, err := p.Compile()
	if err != nil { // a stored policy compiled when it was set
		writeProblem(w, r, fmt.Errorf("stored maintenance policy: %v: %w", err, coordinator.ErrPolicyInvalid))
		return
	}
	out := api.MaintenanceCalendar{From: from, To: to, Window: []api.TimeRange{}, Exclusions: []api.CalendarExclusion{}}
	for _, s := range c.WindowStretches(from, to) {
		out.Window = append(out.Window, api.TimeRange{Start: s.Start, End: s.End})
	}
	for _, e := range c.Policy().Exclusions {
		if e.Start.Before(to) && e.End.After(from) {
			out.Exclusions = append(out.Exclusions, api.CalendarExclusion{Name: e.Name, Start: e.Start, End: e.End, Scope: string(e.Scope)})
		}
	}
	writeJSON(w, 200, out)
}

func (h *handlers) preflight(w http.ResponseWriter, r *http.Request) {
	run, err := h.svc.Preflight(chi.URLParam(r, "name"), chi.URLParam(r, "id"))
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	writeJSON(w, 200, preflightRunToAPI(run))
}

// Artifacts serves the regular files under dir read-only at
// /artifacts/<name>: kubelet and containerd binaries and image archives a
// release catalog points at, for sites whose hosts cannot reach the
// internet. No directory is listed and nothing outside dir is reachable.
func Artifacts(dir string) http.Handler {
	root, err := os.OpenRoot(dir)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/artifacts/")
		if err != nil || name == "" || strings.HasSuffix(name, "/") {
			writeProblem(w, r, fmt.Errorf("artifact %q: %w", name, coordinator.ErrNotFound))
			return
		}
		f, ferr := root.Open(name)
		if ferr != nil {
			writeProblem(w, r, fmt.Errorf("artifact %q: %w", name, coordinator.ErrNotFound))
			return
		}
		defer f.Close()
		st, serr := f.Stat()
		if serr != nil || !st.Mode().IsRegular() {
			writeProblem(w, r, fmt.Errorf("artifact %q: %w", name, coordinator.ErrNotFound))
			return
		}
		http.ServeContent(w, r, name, st.ModTime(), f)
	})
}
