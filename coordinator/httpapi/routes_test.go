package httpapi

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEveryRouteSaysHowItIsServed: a route that is not a GET or HEAD
// changes something, so it is either an audited write or an agent's call
// (which docs/security.md says the audit log leaves out); an agent's call
// is an agent route; a read is served by any member; only the web view's
// sessions are a member's own; members call each other only to relay
// beats, learn the read index and learn each other's capabilities. A write route added
// without a success status, or a read on the leader, fails here.
func TestEveryRouteSaysHowItIsServed(t *testing.T) {
	audited := 0
	for _, rt := range (&handlers{cfg: Config{Gatherer: nil, ArtifactDir: t.TempDir()}}).routes() {
		name := rt.method + " " + rt.pattern
		reads := rt.method == http.MethodGet || rt.method == http.MethodHead
		switch rt.serve {
		case read:
			require.True(t, reads, "%s changes state: declare it write(status) or agentCall", name)
		case local:
			require.Contains(t, []string{"POST /v1/session", "DELETE /v1/session"}, name, "only web sessions live in one member's memory")
		case agentCall, agentBeat:
			require.Equal(t, NeedAgent, rt.need, "%s: only agents' own calls go unrecorded", name)
		case memberCall:
			require.Contains(t, []string{"POST " + relayedBeatsPath, "GET " + readIndexPath, "GET " + memberSelfPath}, name,
				"only the beats a follower relays, the read index it asks for and the capabilities the leader asks for are a member's own calls")
			require.Equal(t, NeedMember, rt.need, name)
		default:
			require.True(t, rt.serve.leader, name)
			require.False(t, reads, "%s: a read is not recorded", name)
			require.Contains(t, []int{http.StatusOK, http.StatusCreated, http.StatusAccepted, http.StatusNoContent}, rt.serve.audit, name)
			audited++
		}
	}
	require.Equal(t, len(Audited(Config{})), audited)
	require.Equal(t, 202, Audited(Config{})["POST /v1/clusters/{name}/upgrade"])
	require.Equal(t, 201, Audited(Config{})["POST /v1/tokens"])
	require.NotContains(t, Audited(Config{}), "POST /v1/agents/{cluster}/{node}/heartbeat")
	require.NotContains(t, Audited(Config{}), "POST "+relayedBeatsPath)
	require.Contains(t, Audited(Config{}), "POST /v1/agents/enroll")
}

// Audited lists the routes the audit log records, keyed as Requirements
// keys them, with the status each answers when its write applied.
func Audited(cfg Config) map[string]int {
	out := map[string]int{}
	for _, rt := range (&handlers{cfg: cfg}).routes() {
		if rt.serve.audit != 0 {
			out[rt.method+" "+rt.pattern] = rt.serve.audit
		}
	}
	return out
}
