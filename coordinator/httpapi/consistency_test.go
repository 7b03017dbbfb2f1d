package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator"
)

// indexedMember is a member whose applied index the test moves by hand;
// only the methods the read path calls are implemented.
type indexedMember struct {
	fakeLeadership
	Authenticator
	AuditTrail
	ReleaseService

	applied atomic.Uint64
	mu      sync.Mutex
	waiting chan struct{} // closed when a read starts waiting
	leader  string
	// audited are the records the API stored on their own: this fake's
	// writes do not carry theirs.
	audited []coordinator.AuditRecord
}

func (m *indexedMember) RecordAudit(_ context.Context, r coordinator.AuditRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.audited = append(m.audited, r)
	return nil
}

// testToken is the admin token the fake members accept.
const testToken = "abcdef.0123456789abcdef0123456789abcdef"

func (m *indexedMember) AuthenticateToken(tok string) (api.Token, error) {
	if tok != testToken {
		return api.Token{}, coordinator.ErrUnauthorized
	}
	return api.Token{ID: "abcdef", Kind: api.TokenAPI, Role: "admin"}, nil
}

func (m *indexedMember) IsLeader() bool         { return m.leader == "" }
func (m *indexedMember) LeaderHTTPAddr() string { return m.leader }
func (m *indexedMember) AppliedIndex() uint64   { return m.applied.Load() }
func (m *indexedMember) Releases() []api.Release {
	return []api.Release{{Version: "1.34.4"}}
}

func (m *indexedMember) Release(v string) (api.Release, error) {
	return api.Release{Version: v}, nil
}

func (m *indexedMember) PutRelease(context.Context, api.Release) error {
	m.applied.Add(1) // the write's entry, applied before the answer
	return nil
}

func (m *indexedMember) WaitApplied(ctx context.Context, index uint64) error {
	m.mu.Lock()
	if m.waiting != nil {
		close(m.waiting)
		m.waiting = nil
	}
	m.mu.Unlock()
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for m.applied.Load() < index {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func getReleases(t *testing.T, url string, minIndex string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/v1/releases", nil)
	require.NoError(t, err)
	if minIndex != "" {
		req.Header.Set(api.MinIndexHeader, minIndex)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestAnswersNameTheIndexTheyReflect(t *testing.T) {
	m := &indexedMember{}
	m.applied.Store(41)
	srv := httptest.NewServer(New(servicesOf(m), Config{}))
	t.Cleanup(srv.Close)

	resp := getReleases(t, srv.URL, "")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "41", resp.Header.Get(api.IndexHeader))

	c := client.New(srv.URL, nil)
	c.SetBearerToken(testToken)
	_, err := c.Do(context.Background(), http.MethodPut, "/v1/releases/1.34.4", api.Release{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(42), c.Seen(), "a write's answer carries the index after the write")
	require.Len(t, m.audited, 1, "a write that did not carry its record is recorded on its own")
	require.Equal(t, coordinator.AuditRecord{Principal: "token:abcdef", Kind: KindOperator, Role: "admin", Method: "PUT",
		Route: "/v1/releases/{version}", Path: "/v1/releases/1.34.4", Status: 200}, m.audited[0])
}

func TestReadWaitsForTheClientsIndex(t *testing.T) {
	m := &indexedMember{waiting: make(chan struct{})}
	m.applied.Store(5)
	srv := httptest.NewServer(New(servicesOf(m), Config{CatchUp: time.Minute}))
	t.Cleanup(srv.Close)

	waiting := m.waiting
	go func() {
		<-waiting
		m.applied.Store(7)
	}()
	resp := getReleases(t, srv.URL, "7")
	require.Equal(t, 200, resp.StatusCode, "served once the member applied index 7")
	require.Equal(t, "7", resp.Header.Get(api.IndexHeader))
}

func TestReadFromAMemberThatStaysBehindIsRefusedAsLagging(t *testing.T) {
	m := &indexedMember{}
	m.applied.Store(5)
	srv := httptest.NewServer(New(servicesOf(m), Config{CatchUp: 10 * time.Millisecond}))
	t.Cleanup(srv.Close)

	resp := getReleases(t, srv.URL, "9")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	p := &api.Problem{}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(p))
	require.Equal(t, api.ProblemLagging, p.Suffix())
	require.Contains(t, p.Detail, "applied index 5, the client has seen 9")
}

func TestForwardedAnswerKeepsTheLeadersIndex(t *testing.T) {
	leader := &indexedMember{}
	leader.applied.Store(100)
	ls := httptest.NewServer(New(servicesOf(leader), Config{}))
	t.Cleanup(ls.Close)
	follower := &indexedMember{leader: ls.Listener.Addr().String()}
	follower.applied.Store(90)
	fs := httptest.NewServer(New(servicesOf(follower), Config{}))
	t.Cleanup(fs.Close)

	c := client.New(fs.URL, nil)
	c.SetBearerToken(testToken)
	_, err := c.Do(context.Background(), http.MethodPut, "/v1/releases/1.34.4", api.Release{Version: "1.34.4"}, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(101), c.Seen(), "the follower passed on the leader's index, not its own")
	require.Empty(t, follower.audited, "the leader records a forwarded write")
	require.Len(t, leader.audited, 1)
	require.Equal(t, "token:abcdef", leader.audited[0].Principal, "with the principal the follower authenticated")
}

// lateTokenMember knows the admin token only from index 7 on, as a member
// that restarted from an older state learns it when it catches up.
type lateTokenMember struct{ indexedMember }

func (m *lateTokenMember) AuthenticateToken(tok string) (api.Token, error) {
	if m.applied.Load() < 7 {
		return api.Token{}, coordinator.ErrUnauthorized
	}
	return m.indexedMember.AuthenticateToken(tok)
}

// TestCredentialJudgedOnceCaughtUp: a credential a member does not know
// yet is judged once the member applied the index the client has seen
// (reads and writes alike), or refused as lagging — never 401 while the
// member is behind the client.
func TestCredentialJudgedOnceCaughtUp(t *testing.T) {
	m := &lateTokenMember{indexedMember{waiting: make(chan struct{})}}
	m.applied.Store(5)
	srv := httptest.NewServer(New(servicesOf(m), Config{CatchUp: time.Minute}))
	t.Cleanup(srv.Close)
	put := func(minIndex string) *http.Response {
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/v1/releases/1.34.4", strings.NewReader(`{"version":"1.34.4"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		if minIndex != "" {
			req.Header.Set(api.MinIndexHeader, minIndex)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	require.Equal(t, http.StatusUnauthorized, put("").StatusCode, "without the client's index the member judges on what it has")

	waiting := m.waiting
	go func() {
		<-waiting
		m.applied.Store(7)
	}()
	require.Equal(t, http.StatusOK, put("7").StatusCode, "judged once index 7 is applied")

	behind := &lateTokenMember{}
	behind.applied.Store(5)
	bs := httptest.NewServer(New(servicesOf(behind), Config{CatchUp: 10 * time.Millisecond}))
	t.Cleanup(bs.Close)
	resp := getReleases(t, bs.URL, "9")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	p := &api.Problem{}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(p))
	require.Equal(t, api.ProblemLagging, p.Suffix())
}
