package tlsaccept

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/trust"
)

// waitTimeout bounds every poll; generous for a loaded shared machine.
const waitTimeout = 30 * time.Second

// pki is a CA with a server and a client certificate for loopback.
type pki struct {
	ca     *trust.CA
	server *tls.Certificate
	client *tls.Certificate
}

var (
	pkiOnce sync.Once
	testPKI pki
)

func testCerts(t *testing.T) pki {
	t.Helper()
	pkiOnce.Do(func() {
		ca, err := trust.NewCA("tlsaccept test CA", time.Now())
		if err != nil {
			panic(err)
		}
		issue := func(id string) *tls.Certificate {
			key, err := trust.NewKey()
			if err != nil {
				panic(err)
			}
			certPEM, err := ca.IssueMember(id, []string{"127.0.0.1"}, key.Public(), time.Now())
			if err != nil {
				panic(err)
			}
			keyPEM, err := trust.EncodeKey(key)
			if err != nil {
				panic(err)
			}
			kp, err := trust.KeyPair(certPEM, keyPEM, ca.Cert)
			if err != nil {
				panic(err)
			}
			return &kp
		}
		testPKI = pki{ca: ca, server: issue("server"), client: issue("client")}
	})
	return testPKI
}

func (p pki) serverTLS() *tls.Config {
	c := trust.ServerConfig(p.ca.Pool(), func() (*tls.Certificate, error) { return p.server, nil })
	c.ClientAuth = tls.RequireAndVerifyClientCert
	return c
}

func (p pki) clientTLS(withCert bool) *tls.Config {
	var get func() (*tls.Certificate, error)
	if withCert {
		get = func() (*tls.Certificate, error) { return p.client, nil }
	}
	return trust.ClientConfig(p.ca.Pool(), get)
}

// listen starts a Listener on loopback with a fake clock and a goroutine
// that accepts and collects connections.
func listen(t *testing.T, cfg Config) (*Listener, *clock.Manual, <-chan net.Conn) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	clock := clock.NewManual(time.Time{})
	cfg.Clock = clock
	if cfg.TLS == nil {
		cfg.TLS = testCerts(t).serverTLS()
	}
	l := New(inner, cfg)
	accepted := make(chan net.Conn, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		require.NoError(t, l.Close())
		<-done
	})
	return l, clock, accepted
}

// dialFrom opens a raw TCP connection to l from a loopback source address
// (127.0.0.x: each is a host of its own) that sends nothing.
func dialFrom(t *testing.T, l *Listener, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether the server closed c: a read returns EOF
// or a reset. It waits for at most a short while per poll (a live
// connection sends nothing, so the read times out).
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, waitTimeout, 10*time.Millisecond, "timed out waiting until %s", what)
}

func inProgress(l *Listener, n int) func() bool {
	return func() bool { return l.Stats().InProgress == n }
}

// waitingOnPeer: n handshakes are blocked reading from their peer. A
// handshake counted in progress may not have reached its first read yet
// (its goroutine not yet run); until then it waits on this process and
// gives way to no one.
func waitingOnPeer(l *Listener, n int) func() bool {
	return func() bool { return l.Stats().WaitingOnPeer == n }
}

// TestStalledHandshakeClosedAtDeadline: a peer that connects and sends
// nothing holds its slot until the handshake deadline, then is closed and
// counted; tls.NewListener would keep it until the peer leaves.
func TestStalledHandshakeClosedAtDeadline(t *testing.T) {
	var mu sync.Mutex
	var seen []Reason
	l, clock, _ := listen(t, Config{HandshakeTimeout: 10 * time.Second, OnRefused: func(r Reason) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
	}})
	idle := dialFrom(t, l, "127.0.0.1")
	waitFor(t, "the handshake is in progress", inProgress(l, 1))

	clock.Advance(9 * time.Second)
	require.False(t, closedByServer(idle), "closed before the deadline")
	require.Equal(t, 1, l.Stats().InProgress)

	clock.Advance(time.Second)
	waitFor(t, "the stalled connection is closed", func() bool { return closedByServer(idle) })
	waitFor(t, "its slot is free", inProgress(l, 0))
	waitFor(t, "the timeout is counted", func() bool { return l.Stats().Refused[ReasonTimeout] == 1 })
	mu.Lock()
	require.Equal(t, []Reason{ReasonTimeout}, seen)
	mu.Unlock()
}

// TestHalfHandshakeClosedAtDeadline: a peer that sends the start of a
// ClientHello and stops is treated as one that sends nothing.
func TestHalfHandshakeClosedAtDeadline(t *testing.T) {
	l, clock, _ := listen(t, Config{})
	c := dialFrom(t, l, "127.0.0.1")
	_, err := c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}) // a record header, a few bytes of hello
	require.NoError(t, err)
	waitFor(t, "the handshake is in progress", inProgress(l, 1))
	clock.Advance(DefaultHandshakeTimeout)
	waitFor(t, "the half handshake is closed", func() bool { return closedByServer(c) })
	waitFor(t, "the timeout is counted", func() bool { return l.Stats().Refused[ReasonTimeout] == 1 })
}

// TestBeyondTheBoundsClosedAtOnce: with a host at its bound, its next
// connection is closed at once; with every slot taken, the oldest
// handshake is closed to make room for a new host's, never a reserved
// host's; a reserved host gets in beyond the total, and a real client
// completes its handshake and is accepted meanwhile. No deadline passes.
func TestBeyondTheBoundsClosedAtOnce(t *testing.T) {
	reserved := netip.MustParseAddr("127.0.0.1")
	l, clock, accepted := listen(t, Config{MaxHandshakes: 4, MaxHandshakesPerHost: 2,
		Reserved: func(a netip.Addr) bool { return a == reserved }})

	var stalled []net.Conn
	for _, src := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.2", "127.0.0.3"} {
		stalled = append(stalled, dialFrom(t, l, src))
		waitFor(t, "the handshake is in progress", inProgress(l, len(stalled)))
	}
	waitFor(t, "every handshake waits on its peer", waitingOnPeer(l, len(stalled)))

	// Per host: a third from 127.0.0.2 is closed.
	c := dialFrom(t, l, "127.0.0.2")
	waitFor(t, "the connection beyond its host's bound is closed", func() bool { return closedByServer(c) })
	require.Equal(t, uint64(1), l.Stats().Refused[ReasonLimit])

	// In total: 127.0.0.4 gets the slot of the oldest unreserved
	// handshake waiting on its peer (the first from 127.0.0.2); the
	// reserved one stays.
	fourth := dialFrom(t, l, "127.0.0.4")
	waitFor(t, "the oldest unreserved handshake is closed", func() bool { return closedByServer(stalled[1]) })
	require.Equal(t, uint64(2), l.Stats().Refused[ReasonLimit])
	waitFor(t, "the new one holds a slot", inProgress(l, 4))
	for _, c := range []net.Conn{stalled[0], stalled[2], stalled[3], fourth} {
		require.False(t, closedByServer(c))
	}

	// The reserved host gets in beyond the total and completes.
	p := testCerts(t)
	tc, err := tls.Dial("tcp", l.Addr().String(), p.clientTLS(true))
	require.NoError(t, err)
	defer tc.Close()
	srv := <-accepted
	defer srv.Close()
	stc, ok := srv.(*tls.Conn)
	require.True(t, ok, "Accept returns the *tls.Conn")
	require.True(t, stc.ConnectionState().HandshakeComplete)
	_, err = tc.Write([]byte("x"))
	require.NoError(t, err)
	_, err = io.ReadFull(srv, make([]byte, 1))
	require.NoError(t, err)

	// The deadline frees every slot.
	clock.Advance(DefaultHandshakeTimeout)
	waitFor(t, "every slot is free and counted", func() bool {
		return l.Stats().InProgress == 0 && l.Stats().Refused[ReasonTimeout] == 4
	})
	require.Equal(t, uint64(2), l.Stats().Refused[ReasonLimit], "an evicted handshake is counted once")
}

// TestHandshakeWaitingHereNeverEvicted: with every slot taken, a new
// connection takes the slot of a handshake that waits on its peer, never
// of one that waits on this process (here: the server's own certificate
// choice, held) however old; with none waiting on its peer the new
// connection is closed. Before, the oldest handshake was closed whatever it waited on,
// so a fleet reconnecting faster than the CPU finished handshakes had
// every one closed before it finished.
func TestHandshakeWaitingHereNeverEvicted(t *testing.T) {
	p := testCerts(t)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	srv := p.serverTLS()
	srv.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		entered <- struct{}{}
		<-release
		return nil, nil
	}
	l, _, accepted := listen(t, Config{TLS: srv, MaxHandshakes: 2})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(let) // before the listener's Close, which waits for the held handshake

	busy := make(chan error, 1)
	go func() {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
		c, err := tls.DialWithDialer(d, "tcp", l.Addr().String(), p.clientTLS(true))
		if err == nil {
			c.Close()
		}
		busy <- err
	}()
	<-entered // the oldest handshake now waits on the server
	silent := dialFrom(t, l, "127.0.0.3")
	waitFor(t, "both handshakes are in progress", inProgress(l, 2))
	waitFor(t, "the silent one waits on its peer", waitingOnPeer(l, 1))

	newcomer := dialFrom(t, l, "127.0.0.4")
	waitFor(t, "the handshake waiting on its peer is closed, not the older busy one", func() bool { return closedByServer(silent) })
	waitFor(t, "the newcomer holds its slot", inProgress(l, 2))
	require.False(t, closedByServer(newcomer))
	require.Equal(t, uint64(1), l.Stats().Refused[ReasonLimit])

	// With one slot, held by the busy handshake, a new connection is
	// closed at once.
	l1, _, _ := listen(t, Config{TLS: srv, MaxHandshakes: 1})
	go func() {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.6")}}
		if c, err := tls.DialWithDialer(d, "tcp", l1.Addr().String(), p.clientTLS(true)); err == nil {
			c.Close()
		}
	}()
	<-entered
	late := dialFrom(t, l1, "127.0.0.5")
	waitFor(t, "with no handshake waiting on its peer, the new connection is closed", func() bool { return closedByServer(late) })
	require.Equal(t, uint64(1), l1.Stats().Refused[ReasonLimit])
	require.Equal(t, 1, l1.Stats().InProgress, "the busy handshake keeps its slot")

	let()
	require.NoError(t, <-busy, "the busy handshake finishes")
	c := <-accepted
	c.Close()
}

// TestOnlyReservedInProgress: with every slot held by reserved hosts, a
// new connection from another host is closed at once.
func TestOnlyReservedInProgress(t *testing.T) {
	l, _, _ := listen(t, Config{MaxHandshakes: 1, Reserved: func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.1") }})
	dialFrom(t, l, "127.0.0.1")
	waitFor(t, "the handshake is in progress", inProgress(l, 1))
	c := dialFrom(t, l, "127.0.0.2")
	waitFor(t, "the new connection is closed", func() bool { return closedByServer(c) })
	require.Equal(t, uint64(1), l.Stats().Refused[ReasonLimit])
}

// TestFailedHandshakeNeverAccepted: a client without a certificate fails
// the handshake in the listener and never reaches Accept.
func TestFailedHandshakeNeverAccepted(t *testing.T) {
	l, _, accepted := listen(t, Config{})
	p := testCerts(t)
	c, err := tls.Dial("tcp", l.Addr().String(), p.clientTLS(false))
	if err == nil {
		// TLS 1.3: the client learns of the refusal on its first read.
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	require.Error(t, err)
	waitFor(t, "the failure is counted", func() bool { return l.Stats().Refused[ReasonFailed] == 1 })
	require.Empty(t, accepted)
	require.Equal(t, 0, l.Stats().InProgress)
}

// TestCloseEndsHandshakesInProgress: Close aborts stalled handshakes and
// returns once they ended, counting none as refused.
func TestCloseEndsHandshakesInProgress(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := New(inner, Config{TLS: testCerts(t).serverTLS(), Clock: clock.NewManual(time.Time{})})
	c, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	waitFor(t, "the handshake is in progress", inProgress(l, 1))
	require.NoError(t, l.Close())
	require.Equal(t, 0, l.Stats().InProgress)
	require.Zero(t, l.Stats().Refused[ReasonTimeout]+l.Stats().Refused[ReasonFailed])
	_, err = l.Accept()
	require.ErrorIs(t, err, net.ErrClosed)
	waitFor(t, "the client sees the close", func() bool { return closedByServer(c) })
}

// TestPlainHTTPToldSo: a plain HTTP request to the TLS port is answered
// 400 with the reason, as net/http's TLS server answers it, not a bare
// EOF; it is counted as a failed handshake and never accepted.
func TestPlainHTTPToldSo(t *testing.T) {
	l, _, accepted := listen(t, Config{})
	c := dialFrom(t, l, "127.0.0.1")
	_, err := io.WriteString(c, "GET /v1/members HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(waitTimeout)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(body), "HTTP request to an HTTPS server")
	waitFor(t, "the failure is counted", func() bool { return l.Stats().Refused[ReasonFailed] == 1 })
	require.Empty(t, accepted)
}
