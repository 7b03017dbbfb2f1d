package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/web"
)

// route is one endpoint. Its requirement and how it is served are part of
// its declaration, so a route cannot be added without saying who may call
// it (auth_test.go walks the router and checks every route refuses
// anonymous and too-weak callers) and whether it is a read, an agent's
// call or an audited write (routes_test.go). docs/openapi.yaml documents
// every route with its role, bodies and problems; TestOpenAPI
// (openapi_test.go) fails on a route it does not list.
type route struct {
	method, pattern string
	need            Requirement
	serve           serving
	handler         http.Handler
}

// serving says where a route is served and whether the audit log records
// it.
type serving struct {
	// leader routes change state, or concern agents whose liveness and
	// work queues live on the leader: followers forward them.
	leader bool
	// audit, when not zero, makes the route an audited write: the status
	// it answers when its write applied (the status of the record that
	// the write's own log entry carries; audit.go).
	audit int
	// local routes change only this member's memory (web sessions): the
	// member the caller reaches serves them, and nothing is replicated
	// or recorded.
	local bool
	// relay: an agent's heartbeat, which a follower relays to the leader
	// in a batch when it changes nothing (relay.go) and forwards
	// otherwise.
	relay bool
	// member: a member's own call to another member (relayed heartbeats
	// and the read index, served by the leader alone; a member's
	// capabilities, served by the member asked), never forwarded; like
	// the agents' calls it carries, not recorded.
	member bool
}

var (
	// read: any member answers from its replica.
	read = serving{}
	// agentCall: agents' machine traffic (registration, heartbeats,
	// polls, results), served by the leader and not recorded in the
	// audit log (docs/security.md says why).
	agentCall = serving{leader: true}
	// agentBeat: an agent's heartbeat, an agentCall that a follower may
	// relay to the leader with others (relay.go).
	agentBeat = serving{leader: true, relay: true}
	// memberCall: members' calls to each other (beats a follower relays
	// and the read index, for the leader alone; a member's capabilities).
	memberCall = serving{member: true}
	// local: a change of this member's own memory (web sessions).
	local = serving{local: true}
)

// write is an audited write that answers ok when it applied.
func write(ok int) serving { return serving{leader: true, audit: ok} }

// routes is the API: every route, the role it requires, and how it is
// served. It is the single source of each route's role.
func (h *handlers) routes() []route {
	f := func(fn http.HandlerFunc) http.Handler { return fn }
	rs := []route{
		{"GET", "/healthz", Public, read, f(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })},
		{"GET", "/readyz", Public, read, f(h.readyz)},

		{"GET", "/v1/session", NeedViewer, read, f(h.getSession)},

		{"GET", "/v1/members", NeedViewer, read, f(h.members.members)},
		{"POST", "/v1/members", NeedAdmin, write(200), f(h.members.join)},
		{"POST", "/v1/members/certificate", NeedAdmin, write(200), f(h.members.memberCertificate)},
		{"DELETE", "/v1/members/{id}", NeedAdmin, write(204), f(h.members.removeMember)},

		{"GET", "/v1/tokens", NeedAdmin, read, f(h.credentials.tokens)},
		{"POST", "/v1/tokens", NeedAdmin, write(201), f(h.credentials.createToken)},
		{"DELETE", "/v1/tokens/{id}", NeedAdmin, write(204), f(h.credentials.deleteToken)},

		{"POST", "/v1/secrets/rewrap", NeedAdmin, write(200), f(h.secrets.rewrapSecrets)},

		{"GET", "/v1/audit", NeedAdmin, read, f(h.audit)},

		{"GET", "/v1/channels", NeedViewer, read, f(h.scheduler.channels)},
		{"GET", "/v1/channels/{name}", NeedViewer, read, f(h.scheduler.channel)},
		{"PUT", "/v1/channels/{name}", NeedAdmin, write(200), f(h.scheduler.putChannel)},

		{"GET", "/v1/rollout-sequences", NeedViewer, read, f(h.sequences.list)},
		{"GET", "/v1/rollout-sequences/{sequence}", NeedViewer, read, f(h.sequences.get)},
		{"PUT", "/v1/rollout-sequences/{sequence}", NeedAdmin, write(200), f(h.sequences.put)},
		{"DELETE", "/v1/rollout-sequences/{sequence}", NeedAdmin, write(204), f(h.sequences.delete)},
		{"GET", "/v1/rollout-sequences/{sequence}/plan", NeedViewer, read, f(h.sequences.plan)},
		{"POST", "/v1/rollout-sequences/{sequence}/stages/{stage}/resume", NeedOperator, write(200), f(h.sequences.override(api.SequenceResume))},
		{"POST", "/v1/rollout-sequences/{sequence}/stages/{stage}/skip", NeedOperator, write(200), f(h.sequences.override(api.SequenceSkip))},

		{"GET", "/v1/releases", NeedViewer, read, f(h.releases.releases)},
		{"GET", "/v1/releases/{version}", NeedViewer, read, f(h.releases.release)},
		{"PUT", "/v1/releases/{version}", NeedAdmin, write(200), f(h.releases.putRelease)},

		{"GET", "/v1/clusters", NeedViewer, read, f(h.clusters.clusters)},
		{"GET", "/v1/clusters/{name}", NeedViewer, read, f(h.clusters.cluster)},
		{"PUT", "/v1/clusters/{name}", NeedAdmin, write(200), f(h.clusters.putCluster)},
		{"DELETE", "/v1/clusters/{name}", NeedAdmin, write(204), f(h.clusters.deleteCluster)},
		{"GET", "/v1/clusters/{name}/upgrade", NeedViewer, read, f(h.upgrades.upgrade)},
		{"POST", "/v1/clusters/{name}/upgrade", NeedOperator, write(202), f(h.upgrades.startUpgrade)},
		{"POST", "/v1/clusters/{name}/pools/{pool}/upgrade/{cmd}", NeedOperator, write(200), f(h.upgrades.poolCommand)},
		{"POST", "/v1/clusters/{name}/pools/{pool}/{verb}", NeedOperator, write(200), f(h.upgrades.poolVerb)},
		{"POST", "/v1/clusters/{name}/nodes/{node}/retry", NeedOperator, write(204), f(h.upgrades.retryNode)},
		{"POST", "/v1/clusters/{name}/preflight", NeedOperator, write(202), f(h.preflights.startPreflight)},
		{"GET", "/v1/clusters/{name}/preflight", NeedViewer, read, f(h.preflights.preflights)},
		{"GET", "/v1/clusters/{name}/preflight/{id}", NeedViewer, read, f(h.preflights.preflight)},
		{"GET", "/v1/clusters/{name}/maintenance-policy", NeedViewer, read, f(h.maintenance.policy)},
		{"PUT", "/v1/clusters/{name}/maintenance-policy", NeedOperator, write(200), f(h.maintenance.putPolicy)},
		{"GET", "/v1/clusters/{name}/maintenance-policy/check", NeedViewer, read, f(h.maintenance.checkPolicy)},
		{"GET", "/v1/clusters/{name}/maintenance-policy/calendar", NeedViewer, read, f(h.maintenance.calendar)},
		{"GET", "/v1/clusters/{name}/upgrade-status", NeedViewer, read, f(h.scheduler.upgradeStatus)},
		{"GET", "/v1/clusters/{name}/backups", NeedViewer, read, f(h.backups.list)},

		{"POST", "/v1/agents/enroll", NeedBootstrapToken, write(200), f(h.credentials.enroll)},
		{"POST", "/v1/agents/register", NeedAgent, agentCall, f(h.agents.register)},
		{"POST", "/v1/agents/{cluster}/{node}/certificate", NeedAgent, write(200), f(h.credentials.renew)},
		{"POST", "/v1/agents/{cluster}/{node}/heartbeat", NeedAgent, agentBeat, f(h.agents.heartbeat)},
		{"POST", relayedBeatsPath, NeedMember, memberCall, f(h.relayedBeats)},
		{"GET", readIndexPath, NeedMember, memberCall, f(h.serveReadIndex)},
		{"GET", memberSelfPath, NeedMember, memberCall, f(h.members.self)},
		{"GET", "/v1/agents/{cluster}/{node}/operations", NeedAgent, agentCall, f(h.agents.poll)},
		{"POST", "/v1/agents/{cluster}/{node}/results", NeedAgent, agentCall, f(h.agents.result)},
		{"POST", "/v1/agents/{cluster}/{node}/backups", NeedAgent, agentCall, f(h.backups.upload)},
	}
	if !h.cfg.DisableWeb {
		// The web view: its files are public (they hold no data; the page
		// reads /v1 as its signed-in caller), the session routes are the
		// API's. Sessions are this member's own, so nothing is forwarded.
		ui := web.Handler(f(notFound))
		rs = append(rs,
			route{"GET", "/", Public, read, ui},
			route{"GET", "/ui", Public, read, ui},
			route{"GET", web.Prefix + "*", Public, read, ui},
			route{"POST", "/v1/session", NeedViewer, local, f(h.createSession)},
			route{"DELETE", "/v1/session", NeedViewer, local, f(h.deleteSession)},
		)
	}
	if h.cfg.Gatherer != nil {
		// GET and HEAD only; any other method answers 405 method-not-allowed.
		m := promhttp.HandlerFor(h.cfg.Gatherer, promhttp.HandlerOpts{})
		rs = append(rs, route{"GET", "/metrics", NeedViewer, read, m}, route{"HEAD", "/metrics", NeedViewer, read, m})
	}
	if h.cfg.ArtifactDir != "" {
		// Agents download release binaries here; each is checked against
		// the release's sha256 before use.
		rs = append(rs, route{"GET", "/artifacts/*", NeedAgentOrViewer, read, Artifacts(h.cfg.ArtifactDir)})
	}
	return rs
}

// Requirements lists what every route of the API requires, keyed
// "METHOD pattern" as chi.Walk reports routes: tests walk the router and
// hold each route to its requirement.
func Requirements(cfg Config) map[string]Requirement {
	out := map[string]Requirement{}
	for _, rt := range (&handlers{cfg: cfg}).routes() {
		out[rt.method+" "+rt.pattern] = rt.need
	}
	return out
}
