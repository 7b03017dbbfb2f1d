package main

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api/client"
	"github.com/moltproject/molt/coordinator/httpapi"
	"github.com/moltproject/molt/internal/tlsaccept"
	"github.com/moltproject/molt/trust"
)

// TestAPIListenerBoundsHandshakes: the API's listener closes a connection
// beyond its bound on handshakes in progress at once and counts it, and
// still serves HTTP/2 to a real client meanwhile (net/http gets the
// finished *tls.Conn).
func TestAPIListenerBoundsHandshakes(t *testing.T) {
	m, err := bootstrapTLS(t.TempDir(), "", "", "c1", hostsOf(nil, ""), now)
	require.NoError(t, err)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	refused := map[tlsaccept.Reason]int{}
	ln := apiListener(tcp, m.serverTLS(), func(r tlsaccept.Reason) {
		mu.Lock()
		refused[r]++
		mu.Unlock()
	})
	srv := httpapi.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.Proto))
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	// apiMaxHandshakesPerHost connections from one address that never
	// send a byte, then one more.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	for range apiMaxHandshakesPerHost {
		c, err := d.Dial("tcp", tcp.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
	}
	extra, err := d.Dial("tcp", tcp.Addr().String())
	require.NoError(t, err)
	defer extra.Close()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused[tlsaccept.ReasonLimit] == 1
	}, 30*time.Second, 10*time.Millisecond, "the connection beyond the bound was not refused")
	_ = extra.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = extra.Read(make([]byte, 1))
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "closed at once, not at a deadline: %v", err)

	tr := client.ConfigureTransport(&http.Transport{TLSClientConfig: trust.ClientConfig(m.ca.Pool(), nil)})
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get("https://" + tcp.Addr().String() + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 2, resp.ProtoMajor, "HTTP/2 is still negotiated")
}
