package agent

import (
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// TestRegistersOnceCoordinatorComesUp starts the agent while nothing
// listens at the coordinator's address; it retries with backoff and
// registers, heartbeats and executes once the coordinator is up.
func TestRegistersOnceCoordinatorComesUp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	coord := newFakeCoordinator(t)
	coord.Close() // rebind the same handler to the address the agent uses
	h := newFakeHostAt(t, "https://"+addr, coord)
	_, _ = runAgent(t, h.cfg)

	l, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(coord.Config.Handler)
	srv.Listener = l
	srv.TLS = coord.TLS
	srv.StartTLS()
	t.Cleanup(srv.Close)

	coord.enqueue(api.Operation{ID: "probe", Kind: api.OpProbePeers, ProbePeers: &api.ProbePeers{Addresses: []string{addr}}})
	res := coord.waitResult(t, "probe")
	require.Equal(t, api.OpSucceeded, res.State, res.Message)

	// Heartbeats describe the host, including the last operation.
	require.Eventually(t, func() bool {
		hbs := coord.Heartbeats()
		if len(hbs) == 0 {
			return false
		}
		hb := hbs[len(hbs)-1]
		return hb.LastOperation != nil && hb.LastOperation.ID == "probe"
	}, 10*time.Second, 10*time.Millisecond)
	hbs := coord.Heartbeats()
	hb := hbs[len(hbs)-1]
	require.GreaterOrEqual(t, coord.Registered(), 1)
	require.Equal(t, "c1", hb.Cluster)
	require.True(t, hb.Kubelet.Healthy)
	require.Equal(t, "v1.33.0", hb.Kubelet.Version)
	require.Equal(t, "1.6.20", hb.Containerd.Version)
	require.NotEmpty(t, hb.Disk)
}
