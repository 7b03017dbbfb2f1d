package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moltproject/molt/api"
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
