package raftstore

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/hashicorp/raft"
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
}

// tlsStream is a raft.StreamLayer over TLS on TCP.
type tlsStream struct {
	net.Listener
	advertise net.Addr
	client    *tls.Config
	wrap      func(net.Conn) net.Conn // Config.WrapConn, or nil
}

func newTLSStream(bind string, advertise net.Addr, cfg *TLSConfig, wrap func(net.Conn) net.Conn) (*tlsStream, error) {
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
	if wrap != nil {
		ln = wrappingListener{ln, wrap}
	}
	return &tlsStream{Listener: tls.NewListener(ln, cfg.Server), advertise: advertise, client: cfg.Client, wrap: wrap}, nil
}

// wrappingListener passes every accepted connection through wrap.
type wrappingListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (l wrappingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.wrap(c), nil
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
