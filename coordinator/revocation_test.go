package coordinator_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator"
	"github.com/moltproject/molt/trust"
)

// Revocation at every member (docs/security.md, "Revoking a credential"):
// a deleted API token, and the web sessions that stand for it, are
// refused at once by every member, however far behind its replica is.
// The tests hold a follower's replica behind on purpose (applyHold: its
// Raft still takes the leader's entries and heartbeats, its state machine
// applies none of them), or cut it off from its peers (freezer).

// applyHold holds a member's state machine before each entry while held.
type applyHold struct {
	mu   sync.Mutex
	gate chan struct{} // nil: not held; closed on release
}

func (h *applyHold) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate == nil {
		h.gate = make(chan struct{})
	}
}

func (h *applyHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate != nil {
		close(h.gate)
		h.gate = nil
	}
}

// wait is raftstore.Config.HoldApply.
func (h *applyHold) wait(uint64) {
	h.mu.Lock()
	g := h.gate
	h.mu.Unlock()
	if g != nil {
		<-g
	}
}

// revocationCluster is three members whose apply can be held and whose
// Raft can be frozen, each by member ID.
type revocationCluster struct {
	*testCluster
	holds map[string]*applyHold
	raft  map[string]*freezer
}

func newRevocationCluster(t *testing.T) *revocationCluster {
	rc := &revocationCluster{holds: map[string]*applyHold{}, raft: map[string]*freezer{}}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("m%d", i)
		rc.holds[id], rc.raft[id] = &applyHold{}, newFreezer()
	}
	rc.testCluster = newTestCluster(t, 3, newFakeOps(), func(c *coordinator.Config) {
		c.Raft.HoldApply = rc.holds[c.Raft.NodeID].wait
		c.Raft.WrapConn = rc.raft[c.Raft.NodeID].wrap
	})
	// Release before the members stop (cleanups run last-in first-out).
	t.Cleanup(func() {
		for id := range rc.holds {
			rc.holds[id].release()
			rc.raft[id].thaw()
		}
	})
	return rc
}

// followerOf returns a member other than leader.
func (rc *revocationCluster) followerOf(leader *member) *member {
	for _, m := range rc.list() {
		if m != leader {
			return m
		}
	}
	return nil
}

// newAdminToken creates an admin API token through m and returns its ID
// and secret.
func newAdminToken(t *testing.T, m *member) (id, secret string) {
	t.Helper()
	var tok api.Token
	_, err := m.client().Do(context.Background(), http.MethodPost, "/v1/tokens", api.TokenRequest{Kind: api.TokenAPI, Role: "admin", Description: "to be revoked"}, &tok)
	require.NoError(t, err)
	return tok.ID, tok.Secret
}

// webSession signs in at m with token and returns the session cookie and
// its CSRF value.
func webSession(t *testing.T, m *member, token string) (cookie, csrf string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "https://"+m.addr+"/v1/session", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := httpsClient(nil).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var s api.Session
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&s))
	for _, c := range resp.Cookies() {
		if c.Name == api.SessionCookie {
			return c.Value, s.CSRF
		}
	}
	t.Fatal("no session cookie")
	return "", ""
}

// cred is how a request authenticates: a bearer token, or a session
// cookie with its CSRF value.
type cred struct{ token, cookie, csrf string }

// send sends one request to m as c and returns its status and problem.
func send(t *testing.T, m *member, c cred, method, path, body string) (int, api.Problem) {
	t.Helper()
	req, err := http.NewRequest(method, "https://"+m.addr+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: c.cookie})
		req.Header.Set(api.CSRFHeader, c.csrf)
	}
	resp, err := httpsClient(nil).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var p api.Problem
	if resp.StatusCode >= 300 {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode, p
}

// sendSettled is send, again while the answer is the 503 of an election
// (no-leader, not-leader): on a loaded machine the three members can lose
// their leader for a moment, the member refuses before judging the
// credential or writing anything, and what the test asks is what the
// member answers once a leader is known again.
func sendSettled(t *testing.T, m *member, c cred, method, path, body string) (int, api.Problem) {
	t.Helper()
	var status int
	var p api.Problem
	eventually(t, method+" "+path+" with a leader known", func() bool {
		status, p = send(t, m, c, method, path, body)
		return status != http.StatusServiceUnavailable ||
			(p.Suffix() != api.ProblemNoLeader && p.Suffix() != api.ProblemNotLeader)
	})
	return status, p
}

// revokedBehind creates an admin token and a web session for it at a
// follower, holds the follower's replica, deletes the token at the leader
// and returns with the follower still holding the token.
func revokedBehind(t *testing.T, rc *revocationCluster) (leader, follower *member, bearer, session cred) {
	t.Helper()
	leader = rc.waitLeader()
	follower = rc.followerOf(leader)
	id, secret := newAdminToken(t, leader)
	caughtUp(t, leader, follower)
	cookie, csrf := webSession(t, follower, secret)
	rc.holds[follower.id].hold()
	_, err := leader.client().Do(context.Background(), http.MethodDelete, "/v1/tokens/"+id, nil, nil)
	require.NoError(t, err)
	_, err = leader.c.AuthenticateToken(secret)
	require.Error(t, err, "the leader no longer knows the token")
	_, err = follower.c.AuthenticateToken(secret)
	require.NoError(t, err, "the follower's replica still holds the deleted token")
	return leader, follower, cred{token: secret}, cred{cookie: cookie, csrf: csrf}
}

// TestDeletedTokenCannotWriteThroughALaggingFollower: right after a
// token's deletion, a write sent through a follower whose replica has not
// applied it is refused (the leader judges the token itself), as bearer
// token and as web session, and nothing is written.
func TestDeletedTokenCannotWriteThroughALaggingFollower(t *testing.T) {
	rc := newRevocationCluster(t)
	leader, follower, bearer, session := revokedBehind(t, rc)
	for _, tc := range []struct {
		name    string
		c       cred
		version string
	}{{"bearer", bearer, "1.40.1"}, {"session", session, "1.40.2"}} {
		t.Run(tc.name, func(t *testing.T) {
			status, p := sendSettled(t, follower, tc.c, http.MethodPut, "/v1/releases/"+tc.version, string(mustJSON(t, release(tc.version))))
			require.Equal(t, http.StatusUnauthorized, status, "%+v", p)
			require.Equal(t, api.ProblemUnauthorized, p.Suffix())
			_, err := leader.c.Release(tc.version)
			require.ErrorIs(t, err, coordinator.ErrNotFound, "nothing was written")
		})
	}
	_, err := follower.c.AuthenticateToken(bearer.token)
	require.NoError(t, err, "the follower was still behind throughout")
}

// TestDeletedTokenCannotReadThroughALaggingFollower: a read through a
// follower that has not applied the deletion is refused (503 while it
// stays behind; 401 once it has caught up), never served.
func TestDeletedTokenCannotReadThroughALaggingFollower(t *testing.T) {
	rc := newRevocationCluster(t)
	_, follower, bearer, session := revokedBehind(t, rc)
	for _, c := range []cred{bearer, session} {
		status, p := sendSettled(t, follower, c, http.MethodGet, "/v1/releases", "")
		require.Equal(t, http.StatusServiceUnavailable, status, "%+v", p)
		require.Equal(t, api.ProblemLagging, p.Suffix())
		require.Equal(t, "credential-freshness", p.Rule)
	}
	rc.holds[follower.id].release()
	for _, c := range []cred{bearer, session} {
		status, p := sendSettled(t, follower, c, http.MethodGet, "/v1/releases", "")
		require.Equal(t, http.StatusUnauthorized, status, "%+v", p)
	}
	status, p := sendSettled(t, follower, cred{token: testAdmin}, http.MethodGet, "/v1/releases", "")
	require.Equal(t, http.StatusOK, status, "a live token reads at the caught-up follower: %+v", p)
}

// TestCutOffFollowerRefusesTokens: a follower cut off from its peers
// (its Raft frozen; its clients still reach it) refuses what an operator's
// token or session asks of it rather than judge it by its stale replica:
// a token deleted since is refused while the follower still reaches the
// leader's API (it cannot apply the deletion), and any token once it knows
// no leader. Agents' certificates are judged without the leader.
func TestCutOffFollowerRefusesTokens(t *testing.T) {
	rc := newRevocationCluster(t)
	leader := rc.waitLeader()
	follower := rc.followerOf(leader)
	registerLab(t, leader.client())
	ag, err := enrollAgent(context.Background(), leader.client(), leader.addr, "lab", "worker-1")
	require.NoError(t, err)
	id, secret := newAdminToken(t, leader)
	caughtUp(t, leader, follower)
	cookie, csrf := webSession(t, follower, secret)
	live, liveCSRF := webSession(t, follower, testAdmin)
	rc.raft[follower.id].freeze()
	_, err = leader.client().Do(context.Background(), http.MethodDelete, "/v1/tokens/"+id, nil, nil)
	require.NoError(t, err)

	for _, c := range []cred{{token: secret}, {cookie: cookie, csrf: csrf}} {
		status, p := send(t, follower, c, http.MethodGet, "/v1/releases", "")
		require.Equal(t, http.StatusServiceUnavailable, status, "the deleted token is not served: %+v", p)
		require.Equal(t, "credential-freshness", p.Rule, "%+v", p)
	}

	eventually(t, "the cut-off follower knows no leader", func() bool { id, _, _ := follower.c.Store().Leader(); return id == "" })
	for _, c := range []cred{{token: testAdmin}, {cookie: live, csrf: liveCSRF}} {
		status, p := send(t, follower, c, http.MethodGet, "/v1/releases", "")
		require.Equal(t, http.StatusServiceUnavailable, status, "%+v", p)
		require.Equal(t, api.ProblemNoLeader, p.Suffix(), "%+v", p)
		require.Equal(t, "credential-freshness", p.Rule, "%+v", p)
	}
	// An agent's read at the same member is judged by its certificate.
	_, err = ag.client(follower.addr).Do(context.Background(), http.MethodGet, "/artifacts/none", nil, nil)
	require.True(t, api.IsProblem(err, api.ProblemNotFound), "an agent's certificate is judged here, without the leader: %v", err)
}

// TestRevokedAgentCertificateRefusedThroughALaggingFollower: an agent
// certificate revoked by two renewals at the leader is refused on what a
// lagging follower forwards or relays (the leader checks the serial
// again), though the follower's replica still holds it current.
func TestRevokedAgentCertificateRefusedThroughALaggingFollower(t *testing.T) {
	rc := newRevocationCluster(t)
	leader := rc.waitLeader()
	follower := rc.followerOf(leader)
	registerLab(t, leader.client())
	ctx := context.Background()
	ag, err := enrollAgent(ctx, leader.client(), leader.addr, "lab", "cp-1")
	require.NoError(t, err)
	code, p := call(t, leader.addr, "POST", "/v1/agents/register", "", ag.cert, `{"cluster":"lab","node":"cp-1"}`)
	require.Equal(t, http.StatusOK, code, "%+v", p)
	beat := string(mustJSON(t, healthBeat("cp-1", true)))
	code, p = call(t, leader.addr, "POST", "/v1/agents/lab/cp-1/heartbeat", "", ag.cert, beat)
	require.Equal(t, http.StatusNoContent, code, "%+v", p)
	caughtUp(t, leader, follower)
	rc.holds[follower.id].hold()
	renew := func(with *tls.Certificate) *tls.Certificate {
		key, _ := trust.NewKey()
		csr, _ := trust.NewCSR(trust.AgentIdentity("lab", "cp-1"), key)
		var resp api.EnrollResponse
		_, err := client.New("https://"+leader.addr, httpsClient(with)).Do(ctx, http.MethodPost, "/v1/agents/lab/cp-1/certificate", api.RenewRequest{CSR: string(csr)}, &resp)
		require.NoError(t, err)
		keyPEM, _ := trust.EncodeKey(key)
		kp, err := trust.KeyPair([]byte(resp.Certificate), keyPEM, testCA.Cert)
		require.NoError(t, err)
		return &kp
	}
	renew(renew(ag.cert))
	serial := coordinator.SerialOf(ag.cert.Leaf.SerialNumber.Bytes())
	require.False(t, leader.c.AgentCertValid("lab", "cp-1", serial), "the leader revoked the first certificate")
	require.True(t, follower.c.AgentCertValid("lab", "cp-1", serial), "the follower's replica still holds it current")

	code, p = call(t, follower.addr, "POST", "/v1/agents/register", "", ag.cert, `{"cluster":"lab","node":"cp-1"}`)
	require.Equal(t, http.StatusUnauthorized, code, "forwarded: %+v", p)
	require.Equal(t, "certificate-revoked", p.Rule)
	// A beat that changes nothing the follower holds is relayed in a
	// batch; the leader checks the serial the batch carries.
	code, p = call(t, follower.addr, "POST", "/v1/agents/lab/cp-1/heartbeat", "", ag.cert, beat)
	require.Equal(t, http.StatusUnauthorized, code, "relayed: %+v", p)
	require.Equal(t, "certificate-revoked", p.Rule)
}

// BenchmarkTokenRead measures an operator's read (GET /v1/releases with a
// bearer token) at the leader and through a follower, and a write at the
// leader (PUT of the same release, committed with its audit record), one
// at a time, on three members with production Raft timing. Against
// the same benchmark before credentials were judged by fresh state, the
// difference is what the read index costs (docs/security.md).
func BenchmarkTokenRead(b *testing.B) {
	productionTiming = true
	defer func() { productionTiming = false }()
	tc := newTestCluster(b, 3, newFakeOps())
	leader := tc.waitLeader()
	var follower *member
	for _, m := range tc.list() {
		if m != leader {
			follower = m
			break
		}
	}
	put(b, leader.client(), "/v1/releases/1.33.6", release("1.33.6"))
	idx := leader.c.Store().AppliedIndex()
	eventually(b, "the follower caught up", func() bool { return follower.c.Store().AppliedIndex() >= idx })
	rb, err := json.Marshal(release("1.33.6"))
	require.NoError(b, err)
	body := string(rb)
	for _, bc := range []struct {
		name, method string
		at           *member
	}{{"leader", http.MethodGet, leader}, {"follower", http.MethodGet, follower}, {"leader-write", http.MethodPut, leader}} {
		b.Run(bc.name, func(b *testing.B) {
			cl := httpsClient(nil)
			url := "https://" + bc.at.addr + "/v1/releases"
			if bc.method == http.MethodPut {
				url += "/1.33.6"
			}
			b.ResetTimer()
			for range b.N {
				var rd io.Reader
				if bc.method == http.MethodPut {
					rd = strings.NewReader(body)
				}
				req, _ := http.NewRequest(bc.method, url, rd)
				req.Header.Set("Authorization", "Bearer "+testAdmin)
				req.Header.Set("Content-Type", "application/json")
				resp, err := cl.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}
