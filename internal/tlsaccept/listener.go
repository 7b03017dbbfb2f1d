// Package tlsaccept is a TLS listener that completes every handshake
// itself, before Accept hands the connection on, so that a peer which
// connects and then sends nothing, or stops half way through the
// handshake, costs a bounded number of file descriptors for a bounded
// time and never reaches the code behind Accept.
//
// tls.NewListener returns a connection as soon as TCP accepts it and
// leaves the handshake to the first Read; a reader with no deadline (as
// hashicorp/raft's transport is) then holds the descriptor for ever. Here
// the handshake runs under a deadline (Config.HandshakeTimeout), at most
// Config.MaxHandshakes run at once and at most Config.MaxHandshakesPerHost
// from one remote address. The accept loop never waits for a slow peer: a
// connection beyond its host's bound is closed at once, and with every slot
// taken the oldest handshake that waits on its peer (blocked reading from
// it) is closed to make room; with none waiting on its peer, the new
// connection is closed instead. A real peer answers within a round trip or
// two, so a flood would have to open MaxHandshakes connections within that
// time to crowd it out, while stalled handshakes from many addresses can
// no longer hold every slot until their deadline. A handshake that waits
// on this process (its CPU, when a fleet reconnects at once) is never
// closed for a newer one: closing the oldest whatever it waited on made
// every handshake lose its slot before it finished once they arrived
// faster than the CPU completed them, so none finished (15,000 agents
// reconnecting after a leader change, lab/tools/agentload); the peer
// closed at once tries again later (agents retry with a backoff).
// Accept returns only
// *tls.Conn values whose handshake succeeded, so net/http still sees the
// negotiated protocol (HTTP/2).
package tlsaccept

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moltproject/molt/internal/clock"
)

// Defaults of Config's zero fields.
const (
	// DefaultHandshakeTimeout is how long a peer has to finish its
	// handshake. A member or an agent on any network finishes in
	// milliseconds; 10 s also matches the API's ReadHeaderTimeout, which
	// bounded the API's handshakes before.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultMaxHandshakes bounds handshakes in progress on one listener.
	DefaultMaxHandshakes = 256
	// DefaultMaxHandshakesPerHost bounds those from one remote address, so
	// that one flooding host cannot take every slot.
	DefaultMaxHandshakesPerHost = 16
)

// Reason is why a connection was closed before it reached Accept.
type Reason string

// The reasons, a fixed set (metric label values).
const (
	// ReasonLimit: a bound on handshakes in progress was reached: a new
	// connection beyond its host's bound was closed at once, or the
	// oldest handshake was closed to make room for a new one.
	ReasonLimit Reason = "limit"
	// ReasonTimeout: the handshake did not finish within HandshakeTimeout.
	ReasonTimeout Reason = "timeout"
	// ReasonFailed: the handshake failed (a certificate the TLS
	// configuration refuses, a protocol error, the peer went away).
	ReasonFailed Reason = "failed"
)

// Reasons lists every Reason.
var Reasons = []Reason{ReasonLimit, ReasonTimeout, ReasonFailed}

// Clock schedules the handshake deadline (AfterFunc); tests inject a
// clock.Manual.
type Clock = clock.Clock

// Config configures a Listener. Zero fields take the defaults.
type Config struct {
	// TLS is the server configuration. Whatever it verifies (client
	// certificates, VerifyConnection) is verified before Accept returns.
	TLS *tls.Config
	// HandshakeTimeout bounds one handshake, from TCP accept to its end.
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the handshakes in progress.
	MaxHandshakes int
	// MaxHandshakesPerHost bounds the handshakes in progress from one
	// remote address.
	MaxHandshakesPerHost int
	// Reserved, when set, names remote addresses exempt from
	// MaxHandshakes (they still count towards it, and
	// MaxHandshakesPerHost still applies to them), whose handshakes are
	// never closed to make room: on the Raft port, the members' own
	// hosts, so that no flood can keep a member from reconnecting. It is
	// called once per accepted connection, from the accept loop: it must
	// be quick.
	Reserved func(netip.Addr) bool
	// Wrap, when set, wraps each accepted connection below TLS (tests put
	// faults between Raft members with it).
	Wrap func(net.Conn) net.Conn
	// OnRefused, when set, is told of every connection closed before it
	// reached Accept (metrics). It must not block.
	OnRefused func(Reason)
	// Clock schedules handshake deadlines; nil is the wall clock.
	Clock Clock
}

// Stats counts what a Listener did with the connections it accepted.
type Stats struct {
	// InProgress is the number of handshakes running now.
	InProgress int
	// WaitingOnPeer is how many of them are blocked reading from their
	// peer: the ones a new connection may take the slot of.
	WaitingOnPeer int
	// Refused counts connections closed before Accept, by reason.
	Refused map[Reason]uint64
}

// Listener is a net.Listener whose Accept returns only connections that
// finished their TLS handshake (*tls.Conn). Safe for concurrent use.
type Listener struct {
	inner net.Listener
	cfg   Config

	ready   chan net.Conn
	ctx     context.Context // cancelled by Close: aborts handshakes
	cancel  context.CancelFunc
	stopped chan struct{} // closed when the accept loop has ended
	loopErr error         // why it ended; read after stopped
	once    sync.Once
	wg      sync.WaitGroup // handshake goroutines

	mu         sync.Mutex
	inProgress int
	perHost    map[netip.Addr]int
	queue      list.List // *pending, oldest first

	refused [3]atomic.Uint64 // by index in Reasons
}

// New starts accepting on inner. Close closes inner.
func New(inner net.Listener, cfg Config) *Listener {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = DefaultMaxHandshakes
	}
	if cfg.MaxHandshakesPerHost <= 0 {
		cfg.MaxHandshakesPerHost = DefaultMaxHandshakesPerHost
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{
		inner:   inner,
		cfg:     cfg,
		ready:   make(chan net.Conn),
		ctx:     ctx,
		cancel:  cancel,
		stopped: make(chan struct{}),
		perHost: map[netip.Addr]int{},
	}
	go l.loop()
	return l
}

// Accept returns the next connection whose handshake succeeded.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.stopped:
		return nil, l.loopErr
	}
}

// Close stops accepting, aborts the handshakes in progress and waits for
// them to end.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.cancel()
		err = l.inner.Close()
		<-l.stopped
		l.wg.Wait()
	})
	return err
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// Stats returns the handshakes in progress and the refusals so far.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	n, waiting := l.inProgress, 0
	for e := l.queue.Front(); e != nil; e = e.Next() {
		if e.Value.(*pending).reads.waiting() {
			waiting++
		}
	}
	l.mu.Unlock()
	st := Stats{InProgress: n, WaitingOnPeer: waiting, Refused: make(map[Reason]uint64, len(Reasons))}
	for i, r := range Reasons {
		st.Refused[r] = l.refused[i].Load()
	}
	return st
}

// loop accepts TCP connections and starts a handshake for each one that
// fits the bounds. It never waits on a peer.
func (l *Listener) loop() {
	defer close(l.stopped)
	var delay time.Duration
	for {
		raw, err := l.inner.Accept()
		if err != nil {
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				l.loopErr = net.ErrClosed
				return
			}
			// Out of descriptors (EMFILE) and the like: back off as
			// net/http does, rather than spin, and try again.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			if !l.sleep(delay) {
				l.loopErr = net.ErrClosed
				return
			}
			continue
		}
		delay = 0
		ctx, cancel := context.WithCancel(l.ctx)
		p, ok := l.admit(raw, remoteHost(raw), cancel)
		if !ok {
			cancel()
			l.refuse(ReasonLimit)
			raw.Close()
			continue
		}
		l.wg.Add(1)
		go l.handshake(ctx, raw, p)
	}
}

// sleep waits d on the clock; false if the listener closed meanwhile.
func (l *Listener) sleep(d time.Duration) bool {
	woke := make(chan struct{})
	stop := l.cfg.Clock.AfterFunc(d, func() { close(woke) })
	defer stop()
	select {
	case <-woke:
		return true
	case <-l.ctx.Done():
		return false
	}
}

// pending is one handshake in progress.
type pending struct {
	conn     net.Conn // the raw connection
	host     netip.Addr
	reserved bool
	cancel   context.CancelFunc
	elem     *list.Element
	evicted  bool // closed to make room; its slot is already free
	// stopDeadline stops the handshake's deadline, armed in admit;
	// timedOut says the deadline passed.
	stopDeadline func() bool
	timedOut     atomic.Bool
	// reads tells whether the handshake waits on its peer.
	reads *readWatch
}

// readWatch notes whether a handshake is blocked reading from its peer:
// then it waits on the peer, not on this process.
type readWatch struct {
	reading atomic.Bool
	done    atomic.Bool // the handshake ended: reads are no longer watched
}

func (w *readWatch) waiting() bool { return w.reading.Load() }

// watchedConn is a handshake's connection under TLS, whose reads its
// readWatch notes until the handshake ends.
type watchedConn struct {
	net.Conn
	w *readWatch
}

func (c watchedConn) Read(b []byte) (int, error) {
	if c.w.done.Load() {
		return c.Conn.Read(b)
	}
	c.w.reading.Store(true)
	n, err := c.Conn.Read(b)
	c.w.reading.Store(false)
	return n, err
}

// admit takes a handshake slot for host, closing the oldest handshake
// from an unreserved host that waits on its peer when every slot is
// taken, or reports that none may be had: the host is at its own bound,
// or no handshake in progress may be closed (reserved hosts', and those
// waiting on this process).
func (l *Listener) admit(conn net.Conn, host netip.Addr, cancel context.CancelFunc) (*pending, bool) {
	reserved := l.cfg.Reserved != nil && l.cfg.Reserved(host)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perHost[host] >= l.cfg.MaxHandshakesPerHost {
		return nil, false
	}
	if l.inProgress >= l.cfg.MaxHandshakes && !reserved {
		var oldest *pending
		for e := l.queue.Front(); e != nil; e = e.Next() {
			if p := e.Value.(*pending); !p.reserved && p.reads.waiting() {
				oldest = p
				break
			}
		}
		if oldest == nil {
			return nil, false
		}
		l.removeLocked(oldest)
		oldest.evicted = true
		l.refuse(ReasonLimit) // counted before closed, so whoever sees it closed sees it counted
		// Closed here, not only by crypto/tls on the cancel: its
		// descriptor is free before the new connection takes the slot.
		oldest.conn.Close()
		oldest.cancel()
	}
	p := &pending{conn: conn, host: host, reserved: reserved, cancel: cancel, reads: &readWatch{}}
	// The deadline is armed before the slot is visible, so whoever sees
	// the handshake in progress (Stats) sees its deadline running too: a
	// test that advances its clock on that sign never runs ahead of it.
	// Cancelling the context makes crypto/tls close the connection, which
	// ends a handshake blocked in a read.
	p.stopDeadline = l.cfg.Clock.AfterFunc(l.cfg.HandshakeTimeout, func() {
		p.timedOut.Store(true)
		cancel()
	})
	p.elem = l.queue.PushBack(p)
	l.inProgress++
	l.perHost[host]++
	return p, true
}

// release frees p's slot unless it was freed when p was evicted; it
// reports whether p was evicted.
func (l *Listener) release(p *pending) (evicted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !p.evicted {
		l.removeLocked(p)
	}
	return p.evicted
}

func (l *Listener) removeLocked(p *pending) {
	l.queue.Remove(p.elem)
	l.inProgress--
	if l.perHost[p.host]--; l.perHost[p.host] <= 0 {
		delete(l.perHost, p.host)
	}
}

func (l *Listener) refuse(r Reason) {
	for i, x := range Reasons {
		if x == r {
			l.refused[i].Add(1)
		}
	}
	if l.cfg.OnRefused != nil {
		l.cfg.OnRefused(r)
	}
}

// handshake runs one server handshake under the deadline and hands the
// connection to Accept, or closes it. ctx is p's: cancelled to evict it.
func (l *Listener) handshake(ctx context.Context, raw net.Conn, p *pending) {
	defer l.wg.Done()
	defer p.cancel()
	conn := raw
	if l.cfg.Wrap != nil {
		conn = l.cfg.Wrap(raw)
	}
	tc := tls.Server(watchedConn{Conn: conn, w: p.reads}, l.cfg.TLS)
	err := tc.HandshakeContext(ctx)
	p.reads.done.Store(true)
	p.stopDeadline()
	evicted := l.release(p)
	if err != nil {
		switch {
		case evicted || l.ctx.Err() != nil: // counted when evicted; not a refusal when closing
		case p.timedOut.Load():
			l.refuse(ReasonTimeout)
		default:
			l.refuse(ReasonFailed)
		}
		answerPlainHTTP(err)
		tc.Close()
		return
	}
	select {
	case l.ready <- tc:
	case <-l.ctx.Done():
		tc.Close()
	}
}

// answerPlainHTTP tells a client that spoke plain HTTP to a TLS port so,
// as net/http's own TLS server does, instead of a bare EOF: an operator
// who typed http:// sees what is wrong. Only when crypto/tls hands the
// connection back (nothing was written to it yet) and the bytes it read
// start like an HTTP request.
func answerPlainHTTP(err error) {
	var re tls.RecordHeaderError
	if !errors.As(err, &re) || re.Conn == nil {
		return
	}
	switch string(re.RecordHeader[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH":
	default:
		return
	}
	_ = re.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
}

// remoteHost is the connection's remote IP (IPv4-mapped IPv6 unmapped, so
// one host counts once); the zero Addr when it has none (not TCP).
func remoteHost(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
