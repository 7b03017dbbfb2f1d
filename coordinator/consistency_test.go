package coordinator_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/api/client"
)

// TestClientReadsItsWriteFromARestartedFollower: a client writes through
// the leader, then (that endpoint gone) reads from a follower that has
// just restarted and has not yet applied the write. The follower waits
// until it has, so the client reads its own write instead of the older
// state the follower restarted with.
func TestClientReadsItsWriteFromARestartedFollower(t *testing.T) {
	ops := newFakeOps()
	tc := newTestCluster(t, 3, ops)
	leader := tc.waitLeader()
	put(t, leader.client(), "/v1/releases/1.33.6", release("1.33.6"))
	var f *member
	for _, m := range tc.list() {
		if m != leader {
			f = m
			break
		}
	}
	fDir, fHTTP, fRaft := f.dir, f.addr, f.c.Store().RaftAddr()
	f.stop(true)

	// The client's first endpoint reaches the leader through a proxy the
	// test can take away; its second is the follower.
	target, err := url.Parse("https://" + leader.addr)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = httpsClient(nil).Transport
	front := httptest.NewServer(proxy)
	c := client.NewEndpoints([]string{front.URL, "https://" + fHTTP}, httpsClient(nil))
	c.SetBearerToken(testAdmin)
	put(t, c, "/v1/releases/1.34.4", release("1.34.4"))
	require.NotZero(t, c.Seen())

	restarted := startMemberAt(t, f.id, fDir, false, ops, fHTTP, fRaft, nil)
	front.Close()
	var got api.Release
	_, err = c.Do(context.Background(), http.MethodGet, "/v1/releases/1.34.4", nil, &got)
	require.NoError(t, err, "the restarted follower served the client's write")
	require.Equal(t, "1.34.4", got.Version)
	require.Equal(t, "https://"+fHTTP, c.Base())
	require.GreaterOrEqual(t, restarted.c.AppliedIndex(), c.Seen())
}
