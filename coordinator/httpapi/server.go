package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/internal/clock"
)

// Services are what the API needs of a coordinator member, one small
// interface per concern, each declared beside the handlers that use it.
// Where the coordinator works with engine values (phases' cluster specs,
// upgrades and plans, maintenance policies) or records of its own (stored
// preflight runs), the interfaces speak those, and the handlers convert at
// the edge: answers through api/convert or wire.go, bodies through
// api/convert. ServicesOf fills every field with one coordinator; a test
// fills the fields its requests reach.
type Services struct {
	Leadership  Leadership         // forward.go: who leads, what is applied
	Auth        Authenticator      // auth.go: checks credentials
	Audit       AuditTrail         // audit.go: records and reads the audit log
	Relay       HeartbeatRelay     // relay.go: heartbeats relayed in batches
	Releases    ReleaseService     // release_handlers.go
	Clusters    ClusterService     // cluster_handlers.go
	Upgrades    UpgradeService     // upgrade_handlers.go
	Preflights  PreflightService   // preflight_handlers.go
	Maintenance MaintenanceService // maintenance_handlers.go
	Scheduler   SchedulerService   // channel_handlers.go
	Sequences   SequenceService    // sequence_handlers.go
	Members     MemberService      // member_handlers.go
	Credentials CredentialService  // trust_handlers.go
	Secrets     SecretService      // secrets_handlers.go
	Agents      AgentService       // agent_handlers.go
	Backups     BackupService      // backup_handlers.go
}

// ServicesOf serves the API from one coordinator member, which implements
// every interface (the compiler checks each here).
func ServicesOf(c *coordinator.Coordinator) Services {
	return Services{
		Leadership: c, Auth: c, Audit: c, Relay: c,
		Releases: c, Clusters: c, Upgrades: c, Preflights: c, Maintenance: c, Scheduler: c, Sequences: c,
		Members: c, Credentials: c, Secrets: c, Agents: c, Backups: c,
	}
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
func New(s Services, cfg Config) http.Handler {
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
	h := newHandlers(s, cfg)
	h.refusals = newRefusalLimiter(cfg.AuditRefusalEvery, cfg.AuditRefusalBurst)
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

// handlers is the API's middleware (authentication, forwarding,
// consistency, the audit log, the heartbeat relay) and its groups of
// handlers, each holding the one interface it serves from.
type handlers struct {
	cfg    Config
	leader Leadership
	authn  Authenticator
	trail  AuditTrail
	relay  HeartbeatRelay

	releases    *releaseHandlers
	clusters    *clusterHandlers
	upgrades    *upgradeHandlers
	preflights  *preflightHandlers
	maintenance *maintenanceHandlers
	scheduler   *schedulerHandlers
	sequences   *sequenceHandlers
	members     *memberHandlers
	credentials *credentialHandlers
	secrets     *secretHandlers
	agents      *agentHandlers
	backups     *backupHandlers

	// sessions are the web view's sessions on this member (session.go);
	// nil with Config.DisableWeb.
	sessions *sessionStore

	// refusals rates the refused writes the audit log records.
	refusals *refusalLimiter

	// beats relays agents' heartbeats from a follower to the leader
	// (relay.go); nil forwards each beat.
	beats *beatRelay
}

// newHandlers hands each group of handlers its interface; cfg has its
// defaults.
func newHandlers(s Services, cfg Config) *handlers {
	return &handlers{
		cfg: cfg, leader: s.Leadership, authn: s.Auth, trail: s.Audit, relay: s.Relay,
		releases:    &releaseHandlers{svc: s.Releases},
		clusters:    &clusterHandlers{svc: s.Clusters},
		upgrades:    &upgradeHandlers{svc: s.Upgrades, clock: cfg.Clock},
		preflights:  &preflightHandlers{svc: s.Preflights},
		maintenance: &maintenanceHandlers{svc: s.Maintenance, clock: cfg.Clock},
		scheduler:   &schedulerHandlers{svc: s.Scheduler},
		sequences:   &sequenceHandlers{svc: s.Sequences},
		members:     &memberHandlers{svc: s.Members},
		credentials: &credentialHandlers{svc: s.Credentials},
		secrets:     &secretHandlers{svc: s.Secrets},
		backups:     &backupHandlers{svc: s.Backups},
		agents:      &agentHandlers{svc: s.Agents, maxPoll: cfg.MaxPoll, maxPolls: cfg.MaxPollsPerNode, polls: map[string]int{}},
	}
}
