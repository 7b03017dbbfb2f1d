package raftstore

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/hashicorp/raft"

	"github.com/moltproject/molt/internal/tlsaccept"
)

// TLSConfig secures the Raft transport: members accept only peers that
// present a certificate Server's configuration verifies, and dial with
// Client's.
type TLSConfig struct {
	// Server must require and verify client certificates
	// (tls.RequireAndVerifyClientCert) against the cluster CA.
	Server *tls.Config
	// Client verifies the peer against the cluster CA and presents this
	// member's certificate.
	Client *tls.Config

	// The Raft port is open to anyone who can reach it, and
	// hashicorp/raft reads accepted connections with no deadline. So the
	// listener completes each handshake itself before Raft sees the
	// connection (internal/tlsaccept): a peer that never finishes is
	// closed after HandshakeTimeout, at most MaxHandshakes run at once
	// and MaxHandshakesPerHost from one address. One from an address at
	// its bound is closed at once; with every slot taken, the oldest
	// handshake is closed to make room. The members' own addresses are
	// never closed to make room and may exceed MaxHandshakes. Zero values
	// take tlsaccept's defaults (10 s, 256, 16).
	HandshakeTimeout     time.Duration
	MaxHandshakes        int
	MaxHandshakesPerHost int
	// OnHandshakeRefused, when set, is told of every connection closed
	// before it reached Raft (metrics); it must not block.
	OnHandshakeRefused func(tlsaccept.Reason)
	// HandshakeClock schedules handshake deadlines; nil is the wall
	// clock. Tests inject a fake one.
	HandshakeClock tlsaccept.Clock
}

// tlsStream is a raft.StreamLayer over TLS on TCP. Its listener hands
// Raft only connections whose handshake succeeded, so only peers the
// server configuration accepts (members) ever reach Raft.
type tlsStream struct {
	*tlsaccept.Listener
	advertise net.Addr
	client    *tls.Config
	wrap      func(net.Conn) net.Conn // Config.WrapConn, or nil
}

// newTLSStream listens on bind. reserved reports the members' own
// addresses, exempt from MaxHandshakes.
func newTLSStream(bind string, advertise net.Addr, cfg *TLSConfig, wrap func(net.Conn) net.Conn, reserved func(netip.Addr) bool) (*tlsStream, error) {
	if cfg.Server == nil || cfg.Client == nil {
		return nil, errors.New("raftstore: TLS needs a server and a client configuration")
	}
	if cfg.Server.ClientAuth != tls.RequireAndVerifyClientCert {
		return nil, errors.New("raftstore: the Raft TLS server must require and verify client certificates")
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if advertise == nil {
		advertise = ln.Addr()
	}
	if a, ok := advertise.(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		ln.Close()
		return nil, errors.New("raftstore: the Raft address is unspecified (0.0.0.0); set RaftAdvertiseAddr")
	}
	gl := tlsaccept.New(ln, tlsaccept.Config{
		TLS:                  cfg.Server,
		HandshakeTimeout:     cfg.HandshakeTimeout,
		MaxHandshakes:        cfg.MaxHandshakes,
		MaxHandshakesPerHost: cfg.MaxHandshakesPerHost,
		Reserved:             reserved,
		Wrap:                 wrap,
		OnRefused:            cfg.OnHandshakeRefused,
		Clock:                cfg.HandshakeClock,
	})
	return &tlsStream{Listener: gl, advertise: advertise, client: cfg.Client, wrap: wrap}, nil
}

func (s *tlsStream) Addr() net.Addr { return s.advertise }

// Dial connects to a peer and completes the handshake within timeout, so
// a peer with the wrong certificate fails here rather than on first use.
func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if s.wrap == nil {
		return tls.DialWithDialer(d, "tcp", string(addr), s.client)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	raw, err := d.DialContext(ctx, "tcp", string(addr))
	if err != nil {
		return nil, err
	}
	cfg := s.client.Clone()
	if cfg.ServerName == "" {
		host, _, _ := net.SplitHostPort(string(addr))
		cfg.ServerName = host
	}
	conn := tls.Client(s.wrap(raw), cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	return conn, nil
}
