package client

import (
	"net"
	"net/http"
	"time"
)

// A member that stops answering without closing its connections — its
// process frozen (SIGSTOP, a long GC or swap storm), or a network that
// drops packets — is worse than one that died: the kernel of a frozen
// member still accepts connections and acknowledges bytes, so a request
// already sent waits for an answer that comes only when the member
// thaws, and a long poll is indistinguishable from one with nothing to
// offer. The clients of the coordinator (agents, and members forwarding
// to the leader) therefore speak HTTP/2 to it and ping every connection
// that has been silent for PingAfter; a connection whose ping is not
// answered within PingTimeout is closed, which fails every request on it
// at once, and the Client goes on to the next endpoint. Opening a
// connection is bounded the same way.
const (
	// DialTimeout bounds opening a TCP connection to a member.
	DialTimeout = 2 * time.Second
	// HandshakeTimeout bounds the TLS handshake with a member: a frozen
	// member's kernel completes the TCP handshake, but nobody answers the
	// TLS one.
	HandshakeTimeout = 2 * time.Second
	// PingAfter is how long a connection to a member may receive nothing
	// before the client pings it.
	PingAfter = 2 * time.Second
	// PingTimeout is how long the answer to that ping may take before the
	// connection, and every request on it, is given up.
	PingTimeout = time.Second
)

// ConfigureTransport makes tr notice a member that stops answering within
// about PingAfter+PingTimeout (see above) and returns it: HTTP/2 with
// pings, and bounded dial and TLS handshake. Members offer HTTP/2 on their
// API; a server that does not leaves the connection on HTTP/1.1, where
// only the dial and handshake bounds apply.
func ConfigureTransport(tr *http.Transport) *http.Transport {
	tr.DialContext = (&net.Dialer{Timeout: DialTimeout, KeepAlive: 15 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = HandshakeTimeout
	tr.ForceAttemptHTTP2 = true
	h2 := http.HTTP2Config{}
	if tr.HTTP2 != nil {
		h2 = *tr.HTTP2
	}
	h2.SendPingTimeout = PingAfter
	h2.PingTimeout = PingTimeout
	tr.HTTP2 = &h2
	return tr
}

// ServerProtocols is the ALPN list a member's API offers: HTTP/2 first,
// whose pings let clients notice a member that stopped answering (see
// ConfigureTransport), then HTTP/1.1 for clients without it (curl).
var ServerProtocols = []string{"h2", "http/1.1"}
