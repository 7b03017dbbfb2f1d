package raftstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/internal/clock"
	"github.com/moltproject/molt/internal/tlsaccept"
	"github.com/moltproject/molt/trust"
)

var (
	raftCAOnce sync.Once
	raftCA     *trust.CA
)

func testRaftCA(t testing.TB) *trust.CA {
	raftCAOnce.Do(func() {
		var err error
		if raftCA, err = trust.NewCA("raftstore test CA", time.Now()); err != nil {
			panic(err)
		}
	})
	return raftCA
}

// certFor issues a member certificate (or, with agent set, an agent's:
// signed by the same CA, but not a member's) for loopback.
func certFor(t testing.TB, id string, agent bool) *tls.Certificate {
	t.Helper()
	ca := testRaftCA(t)
	key, err := trust.NewKey()
	require.NoError(t, err)
	var certPEM []byte
	if agent {
		want := trust.AgentIdentity("c1", id)
		csr, err := trust.NewCSR(want, key)
		require.NoError(t, err)
		certPEM, _, err = ca.SignAgent(csr, want, time.Now(), time.Hour)
		require.NoError(t, err)
	} else {
		certPEM, err = ca.IssueMember(id, []string{"127.0.0.1"}, key.Public(), time.Now())
		require.NoError(t, err)
	}
	keyPEM, err := trust.EncodeKey(key)
	require.NoError(t, err)
	kp, err := trust.KeyPair(certPEM, keyPEM, ca.Cert)
	require.NoError(t, err)
	return &kp
}

// memberTLS is the Raft TLS of molt-coordinator (cmd/molt-coordinator,
// raftTLS): mutual, members only.
func memberTLS(t testing.TB, id string) *TLSConfig {
	ca := testRaftCA(t)
	cert := certFor(t, id, false)
	get := func() (*tls.Certificate, error) { return cert, nil }
	onlyMembers := func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("no certificate")
		}
		if who, err := trust.IdentityOf(cs.PeerCertificates[0]); err != nil || who.Kind != "member" {
			return fmt.Errorf("%q is not a member", cs.PeerCertificates[0].Subject.CommonName)
		}
		return nil
	}
	srv := trust.ServerConfig(ca.Pool(), get)
	srv.ClientAuth = tls.RequireAndVerifyClientCert
	srv.VerifyConnection = onlyMembers
	cl := trust.ClientConfig(ca.Pool(), get)
	cl.VerifyConnection = onlyMembers
	return &TLSConfig{Server: srv, Client: cl}
}

// connTracker records the Raft connections of one member with the other
// members (WrapConn; all on 127.0.0.1), so a test can cut them all and
// count those it accepted.
type connTracker struct {
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
	port     int // the member's Raft port, set once it is known
}

func (c *connTracker) wrap(conn net.Conn) net.Conn {
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); !ok || !a.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		return conn // the tests' stalled connections come from other addresses
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns = append(c.conns, conn)
	if a, ok := conn.LocalAddr().(*net.TCPAddr); ok && a.Port == c.port {
		c.accepted++
	}
	return conn
}

func (c *connTracker) setPort(addr string) {
	_, p, _ := net.SplitHostPort(addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Sscan(p, &c.port)
}

// cut closes every connection recorded so far and returns how many
// connections the member had accepted.
func (c *connTracker) cut() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
	return c.accepted
}

func (c *connTracker) acceptedSoFar() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted
}

// tlsCluster is newCluster over mutual TLS, every member's handshake
// deadlines on clock, with tweak applied to each TLSConfig.
func tlsCluster(t *testing.T, clock *clock.Manual, tweak func(*TLSConfig)) ([]*node, map[string]*connTracker) {
	t.Helper()
	trackers := map[string]*connTracker{}
	nodes := newCluster(t, 3, func(cfg *Config) {
		tc := memberTLS(t, cfg.NodeID)
		tc.HandshakeClock = clock
		if tweak != nil {
			tweak(tc)
		}
		cfg.TLS = tc
		tr := &connTracker{}
		trackers[cfg.NodeID] = tr
		cfg.WrapConn = tr.wrap
	})
	for _, n := range nodes {
		trackers[n.cfg.NodeID].setPort(n.s.RaftAddr())
	}
	return nodes, trackers
}

// stall opens a TCP connection to addr from src (127.0.0.x: a host of its
// own) that never sends a byte.
func stall(t *testing.T, addr, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the other end closed c (EOF or reset). A
// live connection sends nothing here, so the short read times out.
func closedByPeer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// TestRaftPortClosesStalledHandshakes: a connection to a member's Raft
// port that never finishes TLS is closed at the handshake deadline, and one
// with a certificate of the cluster CA that is not a member's never gets
// past the listener. (With tls.NewListener, hashicorp/raft held the first
// until the peer left, with no deadline.)
func TestRaftPortClosesStalledHandshakes(t *testing.T) {
	clock := clock.NewManual(time.Time{})
	nodes, _ := tlsCluster(t, clock, nil)
	f := without(nodes, waitLeader(t, nodes))[0]

	idle := stall(t, f.s.RaftAddr(), "127.0.0.2")
	half := stall(t, f.s.RaftAddr(), "127.0.0.3")
	_, err := half.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00}) // a handshake record's header, then nothing
	require.NoError(t, err)
	waitFor(t, "both handshakes are in progress", func() bool { return f.s.HandshakeStats().InProgress >= 2 })
	require.False(t, closedByPeer(idle), "closed before the deadline")

	// Each poll moves the clock past the deadline of every handshake
	// started so far; a member's own handshake cut by it is redialled.
	waitFor(t, "the stalled connections are closed", func() bool {
		clock.Advance(tlsaccept.DefaultHandshakeTimeout)
		return closedByPeer(idle) && closedByPeer(half)
	})
	waitFor(t, "both are counted", func() bool { return f.s.HandshakeStats().Refused[tlsaccept.ReasonTimeout] >= 2 })

	// An agent's certificate from the cluster CA: refused in the handshake.
	agent := certFor(t, "w1", true)
	cl := trust.ClientConfig(testRaftCA(t).Pool(), func() (*tls.Certificate, error) { return agent, nil })
	failedBefore := f.s.HandshakeStats().Refused[tlsaccept.ReasonFailed]
	c, err := tls.Dial("tcp", f.s.RaftAddr(), cl)
	if err == nil {
		_, err = c.Read(make([]byte, 1)) // TLS 1.3: the refusal arrives after the client's Finished
		c.Close()
	}
	require.Error(t, err)
	waitFor(t, "the refusal is counted", func() bool {
		return f.s.HandshakeStats().Refused[tlsaccept.ReasonFailed] > failedBefore
	})

	v := putAny(t, nodes, "after", "stall")
	waitKV(t, nodes, map[string]kvEntry{"after": {"stall", v}})
}

// TestRaftPortBoundsHandshakes: with a follower's handshake slots taken
// by stalled connections from other hosts, one more from a host at its
// bound is closed at once, one from a new host takes the oldest one's slot
// (no deadline passes), and still the leader reconnects to the follower
// after every connection between them was cut, and replicates to it.
func TestRaftPortBoundsHandshakes(t *testing.T) {
	clock := clock.NewManual(time.Time{})
	nodes, trackers := tlsCluster(t, clock, func(c *TLSConfig) {
		c.MaxHandshakes = 4
		c.MaxHandshakesPerHost = 3
	})
	leader := waitLeader(t, nodes)
	f := without(nodes, leader)[0]
	va := putAny(t, nodes, "a", "1")
	waitKV(t, nodes, map[string]kvEntry{"a": {"1", va}})

	// Members' handshakes are done; four stalled ones take every slot.
	var stalled []net.Conn
	for i, src := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.3"} {
		stalled = append(stalled, stall(t, f.s.RaftAddr(), src))
		waitFor(t, "the handshake is in progress", func() bool { return f.s.HandshakeStats().InProgress >= i+1 })
	}
	require.Equal(t, 4, f.s.HandshakeStats().InProgress)

	// Beyond the bound per host: a fourth from .2 is closed.
	c := stall(t, f.s.RaftAddr(), "127.0.0.2")
	waitFor(t, "the connection beyond its host's bound is closed", func() bool { return closedByPeer(c) })
	require.Equal(t, uint64(1), f.s.HandshakeStats().Refused[tlsaccept.ReasonLimit])
	// Beyond the total: .4 takes the oldest one's slot.
	stalled = append(stalled, stall(t, f.s.RaftAddr(), "127.0.0.4"))
	waitFor(t, "the oldest handshake is closed", func() bool { return closedByPeer(stalled[0]) })
	require.Equal(t, uint64(2), f.s.HandshakeStats().Refused[tlsaccept.ReasonLimit])
	require.Zero(t, f.s.HandshakeStats().Refused[tlsaccept.ReasonTimeout], "no deadline passed")

	// Cut every Raft connection of the follower: the leader must dial it
	// again, from a member's address, past the full bound.
	before := trackers[f.cfg.NodeID].cut()
	vb := putAny(t, nodes, "b", "2")
	waitKV(t, nodes, map[string]kvEntry{"a": {"1", va}, "b": {"2", vb}})
	require.Greater(t, trackers[f.cfg.NodeID].acceptedSoFar(), before, "the follower accepted a new member connection")
	for _, c := range stalled[1:] {
		require.False(t, closedByPeer(c), "a member's handshake evicts no one")
	}
	require.Equal(t, 4, f.s.HandshakeStats().InProgress, "the stalled handshakes still hold their slots")

	clock.Advance(tlsaccept.DefaultHandshakeTimeout)
	waitFor(t, "the deadline frees the slots", func() bool {
		st := f.s.HandshakeStats()
		return st.InProgress == 0 && st.Refused[tlsaccept.ReasonTimeout] == 4
	})
}
