package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// route is one endpoint. Its requirement is part of its declaration, so a
// route cannot be added without saying who may call it (auth_test.go walks
// the router and checks every route refuses anonymous and too-weak
// callers).
type route struct {
	method, pattern string
	need            Requirement
	// leader routes change state, or concern agents whose liveness and
	// work queues live on the leader: followers forward them.
	leader  bool
	handler http.Handler
}

// routes is the API: every route, the role it requires, and whether the
// leader serves it. It is the single source of each route's role.
func (h *handlers) routes() []route {
	f := func(fn http.HandlerFunc) http.Handler { return fn }
	rs := []route{
		{"GET", "/healthz", Public, false, f(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })},
		{"GET", "/readyz", Public, false, f(h.readyz)},

		{"GET", "/v1/members", NeedViewer, false, f(h.members)},
		{"POST", "/v1/members", NeedAdmin, true, f(h.join)},
		{"POST", "/v1/members/certificate", NeedAdmin, true, f(h.memberCertificate)},
		{"DELETE", "/v1/members/{id}", NeedAdmin, true, f(h.removeMember)},

		{"GET", "/v1/tokens", NeedAdmin, false, f(h.tokens)},
		{"POST", "/v1/tokens", NeedAdmin, true, f(h.createToken)},
		{"DELETE", "/v1/tokens/{id}", NeedAdmin, true, f(h.deleteToken)},

		{"POST", "/v1/secrets/rewrap", NeedAdmin, true, f(h.rewrapSecrets)},

		{"GET", "/v1/releases", NeedViewer, false, f(h.releases)},
		{"GET", "/v1/releases/{version}", NeedViewer, false, f(h.release)},
		{"PUT", "/v1/releases/{version}", NeedAdmin, true, f(h.putRelease)},

		{"GET", "/v1/channels", NeedViewer, false, f(h.channels)},
		{"GET", "/v1/channels/{name}", NeedViewer, false, f(h.channel)},
		{"PUT", "/v1/channels/{name}", NeedAdmin, true, f(h.putChannel)},

		{"GET", "/v1/clusters", NeedViewer, false, f(h.clusters)},
		{"GET", "/v1/clusters/{name}", NeedViewer, false, f(h.cluster)},
		{"PUT", "/v1/clusters/{name}", NeedAdmin, true, f(h.putCluster)},
		{"DELETE", "/v1/clusters/{name}", NeedAdmin, true, f(h.deleteCluster)},
		{"GET", "/v1/clusters/{name}/upgrade", NeedViewer, false, f(h.upgrade)},
		{"POST", "/v1/clusters/{name}/upgrade", NeedOperator, true, f(h.startUpgrade)},
		{"POST", "/v1/clusters/{name}/pools/{pool}/upgrade/{cmd}", NeedOperator, true, f(h.poolCommand)},
		{"POST", "/v1/clusters/{name}/pools/{pool}/{verb}", NeedOperator, true, f(h.poolVerb)},
		{"POST", "/v1/clusters/{name}/nodes/{node}/retry", NeedOperator, true, f(h.retryNode)},
		{"POST", "/v1/clusters/{name}/preflight", NeedOperator, true, f(h.startPreflight)},
		{"GET", "/v1/clusters/{name}/preflight/{id}", NeedViewer, false, f(h.preflight)},
		{"GET", "/v1/clusters/{name}/maintenance-policy", NeedViewer, false, f(h.policy)},
		{"PUT", "/v1/clusters/{name}/maintenance-policy", NeedOperator, true, f(h.putPolicy)},
		{"GET", "/v1/clusters/{name}/maintenance-policy/check", NeedViewer, false, f(h.checkPolicy)},
		{"GET", "/v1/clusters/{name}/upgrade-status", NeedViewer, false, f(h.upgradeStatus)},

		{"POST", "/v1/agents/enroll", NeedBootstrapToken, true, f(h.enroll)},
		{"POST", "/v1/agents/register", NeedAgent, true, f(h.register)},
		{"POST", "/v1/agents/{cluster}/{node}/certificate", NeedAgent, true, f(h.renew)},
		{"POST", "/v1/agents/{cluster}/{node}/heartbeat", NeedAgent, true, f(h.heartbeat)},
		{"GET", "/v1/agents/{cluster}/{node}/operations", NeedAgent, true, f(h.poll)},
		{"POST", "/v1/agents/{cluster}/{node}/results", NeedAgent, true, f(h.result)},
	}
	if h.cfg.Gatherer != nil {
		// GET and HEAD only; any other method answers 405 method-not-allowed.
		m := promhttp.HandlerFor(h.cfg.Gatherer, promhttp.HandlerOpts{})
		rs = append(rs, route{"GET", "/metrics", NeedViewer, false, m}, route{"HEAD", "/metrics", NeedViewer, false, m})
	}
	if h.cfg.ArtifactDir != "" {
		// Agents download release binaries here; each is checked against
		// the release's sha256 before use.
		rs = append(rs, route{"GET", "/artifacts/*", NeedAgentOrViewer, false, Artifacts(h.cfg.ArtifactDir)})
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
